package tggemini_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/adapters/internal/replay"
	"github.com/toolguard/toolguard/provider"
)

// geminiTurn is what a Gemini recording says of one response, beyond what
// every recording says.
type geminiTurn struct {
	Calls []struct {
		ThoughtSignature string `json:"thought_signature"`
	} `json:"calls"`
	TextSignatures []struct {
		Text      string `json:"text"`
		Signature string `json:"signature"`
	} `json:"text_signatures"`
	CallsExecutable bool   `json:"calls_executable"`
	BlockReason     string `json:"block_reason"`
	Usage           struct {
		Prompt     int64 `json:"promptTokenCount"`
		Candidates int64 `json:"candidatesTokenCount"`
		Thoughts   int64 `json:"thoughtsTokenCount"`
	} `json:"usage"`
}

// TestRecordedTraffic serves every recorded Gemini API and Vertex AI
// exchange, byte for byte as the API sent it, to the real genai client
// through the adapter's Model, one Turn per recorded response, and checks
// each reply against the recording: its id; its calls (names, arguments,
// the id Gemini sent or the one derived from the response id and the
// position, whether they may run); text, streamed too; each call's and
// text part's thoughtSignature kept for the next request; usage; the
// ending. Each follow-up request must send the model's parts back with
// their signatures, as the recorded request did, and answer every call by
// name, echoing only ids Gemini sent.
func TestRecordedTraffic(t *testing.T) {
	recs := replay.ForAPI(t, "gemini")
	for _, rec := range recs {
		t.Run(rec.Name, func(t *testing.T) { replayGemini(t, rec) })
	}
	t.Logf("%d Gemini recordings replayed", len(recs))
}

func replayGemini(t *testing.T, rec *replay.Recording) {
	srv := replay.Start(t, rec)
	cfg := &genai.ClientConfig{APIKey: "replay", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}}
	if rec.Mode == "vertex" {
		cfg.Backend = genai.BackendVertexAI
	}
	client, err := genai.NewClient(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := tggemini.NewModel(client, tggemini.ModelOptions{Name: "recorded"})
	tools := replay.Tools(t, rec)
	items := []json.RawMessage{m.UserItem("replay")}
	var prev *provider.Reply
	for i, want := range rec.Expect {
		var extra geminiTurn
		if err := json.Unmarshal(want.Raw, &extra); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			items = append(items, prev.Items...)
			items = append(items, m.OutputItems(outputs(prev, rec.Request(i)))...)
		}
		req := provider.Request{Tools: tools, Items: items}
		var streamed strings.Builder
		if rec.Stream {
			req.Text = func(d string) { streamed.WriteString(d) }
		}
		rep, err := m.Turn(context.Background(), req)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if i > 0 {
			checkFollowUp(t, i, srv.Body(t, i), rec.Request(i), prev)
		}
		if want.ResponseID == "" && !strings.HasPrefix(rep.ID, "gemini-") || want.ResponseID != "" && rep.ID != want.ResponseID {
			t.Errorf("turn %d: id %q, want %q (or one the adapter gave a response without)", i, rep.ID, want.ResponseID)
		}
		if len(rep.Calls) != len(want.Calls) {
			t.Fatalf("turn %d: %d calls, want %d: %+v", i, len(rep.Calls), len(want.Calls), rep.Calls)
		}
		signed := modelParts(t, rep)
		for j, c := range want.Calls {
			got := rep.Calls[j]
			wantID, derived := c.ID, c.ID == ""
			if derived {
				wantID = rep.ID + "/" + strconv.Itoa(j)
			}
			if got.ID != wantID {
				t.Errorf("turn %d call %d: id %q, want %q", i, j, got.ID, wantID)
			}
			if (got.Kind == "derived-id") != derived {
				t.Errorf("turn %d call %d: kind %q, derived %v", i, j, got.Kind, derived)
			}
			if got.Name != c.Name || !replay.SameJSON(got.Arguments, c.Arguments) {
				t.Errorf("turn %d call %d: %s %s, want %s %s", i, j, got.Name, got.Arguments, c.Name, c.Arguments)
			}
			if (got.Answer == nil) != extra.CallsExecutable {
				t.Errorf("turn %d call %d: answered unrun %v, executable %v", i, j, got.Answer != nil, extra.CallsExecutable)
			}
			if sig := extra.Calls[j].ThoughtSignature; signed.calls[j] != sig {
				t.Errorf("turn %d call %d: signature %.20q kept, want %.20q", i, j, signed.calls[j], sig)
			}
		}
		if len(signed.texts) != len(extra.TextSignatures) {
			t.Errorf("turn %d: %d signed text parts kept, want %d", i, len(signed.texts), len(extra.TextSignatures))
		}
		for k, ts := range extra.TextSignatures {
			if k < len(signed.texts) && signed.texts[k] != ts.Signature {
				t.Errorf("turn %d: text signature %d is %.20q, want %.20q", i, k, signed.texts[k], ts.Signature)
			}
		}
		if rep.Text != want.Text {
			t.Errorf("turn %d: text %q, want %q", i, rep.Text, want.Text)
		}
		if rec.Stream && streamed.String() != want.Text {
			t.Errorf("turn %d: streamed %q, want %q", i, streamed.String(), want.Text)
		}
		if rep.InputTokens != extra.Usage.Prompt || rep.OutputTokens != extra.Usage.Candidates+extra.Usage.Thoughts {
			t.Errorf("turn %d: usage %d in %d out, want %+v", i, rep.InputTokens, rep.OutputTokens, extra.Usage)
		}
		if i < len(rec.Expect)-1 {
			if rep.End != provider.EndNormal {
				t.Fatalf("turn %d ended %s (%s) before the recording did", i, rep.End, rep.Reason)
			}
			prev = rep
			continue
		}
		status := string(rep.End)
		if rep.End == provider.EndNormal {
			status = "completed"
			if len(rep.Calls) > 0 {
				status = "exhausted"
			}
		}
		if status != rec.ExpectEnd.Status || rep.Reason != rec.ExpectEnd.Reason {
			t.Errorf("ending %s (%s), want %s (%s)", status, rep.Reason, rec.ExpectEnd.Status, rec.ExpectEnd.Reason)
		}
	}
	if n := srv.Remaining(); n != 0 {
		t.Errorf("%d recorded responses were not asked for", n)
	}
}

// outputs answers the calls of a reply: with the responses the recorded
// request sent where it has them, else a stand-in result.
func outputs(rep *provider.Reply, recorded map[string]any) []provider.Output {
	var sent []string
	for _, p := range lastParts(recorded) {
		if fr, ok := p["functionResponse"].(map[string]any); ok {
			b, _ := json.Marshal(fr["response"])
			sent = append(sent, string(b))
		}
	}
	outs := make([]provider.Output, len(rep.Calls))
	for j, c := range rep.Calls {
		outs[j] = provider.Output{CallID: c.ID, Name: c.Name, Kind: c.Kind, Result: `{"recorded":false}`, OK: true}
		if j < len(sent) {
			outs[j].Result = sent[j]
		}
	}
	return outs
}

// lastParts returns the parts of a request body's last content.
func lastParts(body map[string]any) []map[string]any {
	return contentParts(body, -1)
}

// contentParts returns the parts of a request body's content at i (from
// the end when negative).
func contentParts(body map[string]any, i int) []map[string]any {
	contents, _ := body["contents"].([]any)
	if i < 0 {
		i += len(contents)
	}
	if i < 0 || i >= len(contents) {
		return nil
	}
	c, _ := contents[i].(map[string]any)
	ps, _ := c["parts"].([]any)
	var out []map[string]any
	for _, p := range ps {
		if m, ok := p.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// signatures are the thoughtSignatures of a reply's item, base64 as the
// wire has them: per function call in order, and of its signed text parts.
type signatures struct{ calls, texts []string }

func modelParts(t *testing.T, rep *provider.Reply) signatures {
	var s signatures
	for _, it := range rep.Items {
		var c genai.Content
		if err := json.Unmarshal(it, &c); err != nil {
			t.Fatal(err)
		}
		for _, p := range c.Parts {
			sig := ""
			if len(p.ThoughtSignature) > 0 {
				sig = base64.StdEncoding.EncodeToString(p.ThoughtSignature)
			}
			switch {
			case p.FunctionCall != nil:
				s.calls = append(s.calls, sig)
			case sig != "":
				s.texts = append(s.texts, sig)
			}
		}
	}
	return s
}

// checkFollowUp compares the request the adapter sent after prev with the
// recorded one: the model's turn comes back with every function call and
// its signature as the recorded request has them, and the calls are
// answered in order by name, with the ids Gemini sent and no other.
func checkFollowUp(t *testing.T, i int, sent, recorded map[string]any, prev *provider.Reply) {
	t.Helper()
	model := contentParts(sent, -2)
	var calls []map[string]any
	for _, p := range model {
		if _, ok := p["functionCall"]; ok {
			calls = append(calls, p)
		}
	}
	if len(calls) != len(prev.Calls) {
		t.Fatalf("request %d: the model turn has %d calls, the reply had %d", i, len(calls), len(prev.Calls))
	}
	if recorded != nil {
		// A recorder in Python wrote snake_case members and URL-safe
		// base64; the bytes are what must match.
		var want []map[string]any
		for _, p := range contentParts(recorded, -2) {
			if member(p, "functionCall") != nil {
				want = append(want, p)
			}
		}
		if len(want) != len(calls) {
			t.Errorf("request %d: %d calls sent back, the recorded request has %d", i, len(calls), len(want))
		}
		for j := range min(len(want), len(calls)) {
			if g, w := signature(calls[j]), signature(want[j]); !bytes.Equal(g, w) {
				t.Errorf("request %d call %d: signature %.12x sent back, recorded %.12x", i, j, g, w)
			}
			g := calls[j]["functionCall"].(map[string]any)["name"]
			w := member(want[j], "functionCall").(map[string]any)["name"]
			if g != w {
				t.Errorf("request %d call %d: %v sent back, recorded %v", i, j, g, w)
			}
		}
	}
	var answers []map[string]any
	for _, p := range lastParts(sent) {
		if fr, ok := p["functionResponse"].(map[string]any); ok {
			answers = append(answers, fr)
		}
	}
	if len(answers) != len(prev.Calls) {
		t.Fatalf("request %d: %d function responses for %d calls", i, len(answers), len(prev.Calls))
	}
	for j, a := range answers {
		c := prev.Calls[j]
		wantID := c.ID
		if c.Kind == "derived-id" {
			wantID = ""
		}
		if id, _ := a["id"].(string); a["name"] != c.Name || id != wantID {
			t.Errorf("request %d: response %d names %v id %v, want %s id %q", i, j, a["name"], a["id"], c.Name, wantID)
		}
		if _, ok := a["response"].(map[string]any); !ok {
			t.Errorf("request %d: response %d has no response object: %v", i, j, a)
		}
	}
}

// member returns a part's member by its JSON name or its snake_case form.
func member(p map[string]any, name string) any {
	if v, ok := p[name]; ok {
		return v
	}
	var snake strings.Builder
	for _, r := range name {
		if r >= 'A' && r <= 'Z' {
			snake.WriteByte('_')
			r += 'a' - 'A'
		}
		snake.WriteRune(r)
	}
	return p[snake.String()]
}

// signature decodes a part's thoughtSignature, standard or URL-safe base64.
func signature(p map[string]any) []byte {
	s, _ := member(p, "thoughtSignature").(string)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b
	}
	b, _ := base64.URLEncoding.DecodeString(s)
	return b
}
