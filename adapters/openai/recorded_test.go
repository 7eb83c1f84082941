package tgopenai_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop/provider"
)

// recordings is where the shared recorded traffic lives: real HTTP
// responses of the provider APIs that other public projects recorded. It
// stays outside the repository; the tests read it and skip, saying why,
// where it is absent.
const recordings = "../../../shared/recorded-traffic/recordings"

// recording is one recorded exchange: the responses served in order and
// what each holds.
type recording struct {
	Name         string `json:"name"`
	API          string `json:"api"`
	Stream       bool   `json:"stream"`
	Interactions []struct {
		Status          int    `json:"status"`
		ContentType     string `json:"content_type"`
		ContentEncoding string `json:"content_encoding"`
		Body            string `json:"body_base64"`
	} `json:"interactions"`
	Expect []struct {
		Stop  string `json:"stop"`
		Text  string `json:"text"`
		Calls []struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"calls"`
	} `json:"expect"`
	ExpectEnd struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"expect_end"`
}

// TestRecordedTraffic serves every recorded Responses API exchange, byte
// for byte as the API sent it (JSON or SSE, gzip where it was), to the real
// openai-go client through the adapter's Model, and checks each reply's
// calls (ids, names, arguments), text and ending against the recording.
func TestRecordedTraffic(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(recordings, "*.json"))
	if len(files) == 0 {
		t.Skipf("no recorded traffic at %s (the shared folder beside the repository)", recordings)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec recording
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if rec.API != "responses" {
			continue
		}
		n++
		t.Run(rec.Name, func(t *testing.T) { replay(t, &rec) })
	}
	if n == 0 {
		t.Fatal("no Responses API recording found")
	}
}

func replay(t *testing.T, rec *recording) {
	var next atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)) - 1
		if i >= len(rec.Interactions) {
			http.Error(w, "no more recorded responses", http.StatusGone)
			return
		}
		it := rec.Interactions[i]
		body, err := base64.StdEncoding.DecodeString(it.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", it.ContentType)
		if it.ContentEncoding != "" {
			w.Header().Set("Content-Encoding", it.ContentEncoding)
		}
		w.WriteHeader(it.Status)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("replay"), option.WithMaxRetries(0))
	m := tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "recorded"})
	for i, want := range rec.Expect {
		req := provider.Request{Items: []json.RawMessage{m.UserItem("replay")}}
		var streamed strings.Builder
		if rec.Stream {
			req.Text = func(d string) { streamed.WriteString(d) }
		}
		rep, err := m.Turn(context.Background(), req)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if len(rep.Calls) != len(want.Calls) {
			t.Fatalf("turn %d: %d calls, want %d: %+v", i, len(rep.Calls), len(want.Calls), rep.Calls)
		}
		for j, c := range want.Calls {
			got := rep.Calls[j]
			if got.ID != c.ID || got.Name != c.Name || got.Arguments != c.Arguments {
				t.Errorf("turn %d call %d: %s %s %s, want %s %s %s", i, j, got.ID, got.Name, got.Arguments, c.ID, c.Name, c.Arguments)
			}
		}
		if rep.Text != want.Text {
			t.Errorf("turn %d: text %q, want %q", i, rep.Text, want.Text)
		}
		if rec.Stream && want.Text != "" && streamed.String() != want.Text {
			t.Errorf("turn %d: streamed %q, want %q", i, streamed.String(), want.Text)
		}
		if i == len(rec.Expect)-1 {
			status := string(rep.End)
			if rep.End == provider.EndNormal {
				status = "completed"
			}
			if status != rec.ExpectEnd.Status || rep.Reason != rec.ExpectEnd.Reason {
				t.Errorf("ending %s (%s), want %s (%s)", status, rep.Reason, rec.ExpectEnd.Status, rec.ExpectEnd.Reason)
			}
			var apiErr *provider.APIError
			if failed := rep.End == provider.EndFailed; failed != errors.As(rep.Err, &apiErr) || failed && apiErr.Code != rep.Reason {
				t.Errorf("ending %s carries error %v, want a provider.APIError with code %q exactly when failed", status, rep.Err, rep.Reason)
			}
		}
	}
}
