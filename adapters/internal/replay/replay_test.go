package replay_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/adapters/internal/replay"
)

// TestServerServesInOrder checks that an interaction's payloads are its
// body gunzipped or its stream's data, and that the server answers each
// request with the next interaction's status, headers and exact bytes
// (gzip left compressed on the wire), keeps the request bodies, and
// refuses requests beyond the recording.
func TestServerServesInOrder(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"ok":true}`))
	_ = zw.Close()
	file, _ := json.Marshal(map[string]any{
		"name": "two", "api": "chat", "stream": true,
		"interactions": []map[string]any{
			{"status": 200, "content_type": "application/json", "content_encoding": "gzip", "body_base64": base64.StdEncoding.EncodeToString(gz.Bytes())},
			{"status": 200, "content_type": "text/event-stream; charset=utf-8", "content_encoding": "", "body_base64": base64.StdEncoding.EncodeToString([]byte("data: {}\n\n"))},
		},
		"recorded_requests": []any{map[string]any{"model": "m"}, nil},
		"expect":            []map[string]any{{"text": "a", "calls": []map[string]any{{"id": "c1", "name": "f", "arguments": "{}", "extra": 1}}}, {"text": "b"}},
		"expect_end":        map[string]any{"status": "completed"},
	})
	rec, err := replay.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Request(0)["model"] != "m" || rec.Request(1) != nil {
		t.Errorf("recorded requests %v, %v", rec.Request(0), rec.Request(1))
	}
	if !strings.Contains(string(rec.Expect[0].Calls[0].Raw), `"extra":1`) {
		t.Errorf("call raw %s lost a field", rec.Expect[0].Calls[0].Raw)
	}
	for i, want := range []string{`{"ok":true}`, `{}`} {
		p, err := rec.Interactions[i].Payloads()
		if err != nil || len(p) != 1 || string(p[0]) != want {
			t.Errorf("interaction %d payloads %q, %v; want %s", i, p, err, want)
		}
	}
	srv := replay.Start(t, rec)
	tr := &http.Transport{DisableCompression: true}
	client := &http.Client{Transport: tr}
	post := func(body string) *http.Response {
		t.Helper()
		resp, err := client.Post(srv.URL+"/v1/x?alt=sse", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r1 := post(`{"n":1}`)
	b1, _ := io.ReadAll(r1.Body)
	_ = r1.Body.Close()
	if r1.Header.Get("Content-Encoding") != "gzip" || r1.Header.Get("Content-Type") != "application/json" || !bytes.Equal(b1, gz.Bytes()) {
		t.Errorf("first response %v %q, want the gzip bytes", r1.Header, b1)
	}
	r2 := post(`{"n":2}`)
	b2, _ := io.ReadAll(r2.Body)
	_ = r2.Body.Close()
	if r2.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || string(b2) != "data: {}\n\n" {
		t.Errorf("second response %v %q", r2.Header, b2)
	}
	if srv.Remaining() != 0 {
		t.Errorf("%d interactions left", srv.Remaining())
	}
	r3 := post(`{"n":3}`)
	_ = r3.Body.Close()
	if r3.StatusCode != http.StatusGone {
		t.Errorf("a request past the recording got %d, want 410", r3.StatusCode)
	}
	got := srv.Received()
	if len(got) != 3 || string(got[0].Body) != `{"n":1}` || got[1].Path != "/v1/x" || got[1].Query != "alt=sse" {
		t.Errorf("received %+v", got)
	}
	if srv.Body(t, 1)["n"] != 2.0 {
		t.Errorf("body 1 = %v", srv.Body(t, 1))
	}
}

// TestLoadShared loads every shared recording: each has responses, and as
// many expected turns as responses.
func TestLoadShared(t *testing.T) {
	dir := replay.Dir(t)
	recs, err := replay.Load(dir)
	if errors.Is(err, replay.ErrNoRecordings) {
		t.Skipf("no recorded traffic at %s (set %s to the folder holding it): %v", dir, replay.EnvDir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Name == "" || r.API == "" || len(r.Interactions) == 0 || len(r.Expect) != len(r.Interactions) {
			t.Errorf("%s: name %q api %q, %d responses, %d expected turns", r.File, r.Name, r.API, len(r.Interactions), len(r.Expect))
		}
	}
}

// TestLoadAbsent checks that an absent folder is ErrNoRecordings, which
// ForAPI turns into a skip.
func TestLoadAbsent(t *testing.T) {
	_, err := replay.Load(filepath.Join(t.TempDir(), "absent"))
	if !errors.Is(err, replay.ErrNoRecordings) {
		t.Fatalf("Load of an absent folder: %v, want ErrNoRecordings", err)
	}
}
