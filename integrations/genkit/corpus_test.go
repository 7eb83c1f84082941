package tggenkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/secretcorpus"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/secretscan"
	"github.com/toolguard/toolguard/toolset"
)

type probeIn struct {
	ID int `json:"id"`
}

// TestCorpusSecretsNeverLeave is the framework part of the corpus test
// (secretscan's TestCorpusEverySink drives the providers, MCP, Redis and
// the inbox): every case of the shared corpus (29 secret shapes × 12
// contexts) is put where its context says (a string of a guarded tool's
// output, a key of it, its typed error's message) and run through a Genkit
// generation with secretscan's detector. The scripted model's next request,
// the response's history, the audit log, the spans and the log lines hold
// no 12 characters in a row of any form of the secret (Case.Leak); the
// tool response the model is sent holds the placeholder.
func TestCorpusSecretsNeverLeave(t *testing.T) {
	d, err := secretscan.New(secretscan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cur secretcorpus.Case
	probe := toolset.Read("probe", "Read the probe.", func(context.Context, *guard.Invocation, probeIn) (any, error) {
		switch cur.Where {
		case secretcorpus.AsMapKey:
			return map[string]any{"data": map[string]any{cur.Text: 7}}, nil
		case secretcorpus.AsError:
			return nil, guard.NewError(guard.CodeNotFound, cur.Text)
		}
		return map[string]any{"data": map[string]any{"note": cur.Text, "id": 7}}, nil
	}, nil)
	tools := toolset.MustNew(probe)
	m := &script{}
	gk := newGenkit(t.Context(), m)
	leaks := map[string]int{}
	for _, c := range secretcorpus.Cases() {
		cur = c
		store := guard.NewMemStore(guard.MemStoreOptions{})
		var spans frameworktest.SpanText
		var logs bytes.Buffer
		var opts guard.Options
		if err := (observe.Options{TracerProvider: &spans, Tools: tools,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}).Apply(&opts); err != nil {
			t.Fatal(err)
		}
		opts.Detector, opts.SecretKey = d, bytes.Repeat([]byte("k"), 32)
		gd, err := tggenkit.New(guard.New(tools, store, opts), tools, host.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m.push(calls(&ai.ToolRequest{Name: "probe", Ref: "call-1", Input: map[string]any{"id": 1}}))
		resp, err := generate(session(frameworktest.SecretsUser, "corpus"), gk, gd, ai.WithPrompt("read the probe"))
		if err != nil || resp.Text() != "done" {
			t.Fatalf("%s/%s: generation %v %v", c.Shape, c.Context, resp, err)
		}
		request, _ := json.Marshal(m.lastRequest())
		history, _ := json.Marshal(resp.History())
		recs, _, err := store.Audit(t.Context(), frameworktest.SecretsUser.TenantID, 0, 100)
		if err != nil || len(recs) == 0 {
			t.Fatalf("audit: %d records, %v", len(recs), err)
		}
		audited, _ := json.Marshal(recs)
		spanText, _ := spans.Text()
		if !strings.Contains(string(request), "[secret withheld; hmac-sha256:") {
			t.Errorf("%s/%s: the model's next request holds no placeholder: %s", c.Shape, c.Context, request)
		}
		for sink, text := range map[string]string{"the model's next request": string(request), "the history": string(history),
			"the audit log": string(audited), "the spans": spanText, "the logs": logs.String()} {
			leaks[sink] += 0
			if p, ok := c.Leak(text); ok {
				leaks[sink]++
				t.Errorf("%s/%s: %s holds %q", c.Shape, c.Context, sink, p)
			}
		}
	}
	t.Logf("leaks by sink over %d cases: %v", len(secretcorpus.Cases()), leaks)
}
