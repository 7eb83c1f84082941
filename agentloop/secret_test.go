package agentloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/toolset"
)

const vaultedKey = "sk-live-VAULTED-KEY-0123456789"

type vaultIn struct {
	Service string `json:"service"`
}

type vaultOut struct {
	Service string `json:"service"`
	APIKey  string `json:"api_key" toolguard:"secret"`
}

// TestDeclaredSecretNeverLeaves: a tool returns a secret it declares
// (toolguard:"secret"). The provider's next request, the audit log, the
// spans and the log lines of the run hold the placeholder, never the
// value; the model is told a secret was withheld, with its keyed hash.
func TestDeclaredSecretNeverLeaves(t *testing.T) {
	w := newWorld(t, calls(call("call-1", "read_vault", `{"service":"billing"}`)), openaitest.Turn{Text: "done"})
	tools := toolset.MustNew(toolset.Read("read_vault", "Read a service's API key from the vault.",
		func(context.Context, *guard.Invocation, vaultIn) (vaultOut, error) {
			return vaultOut{Service: "billing", APIKey: vaultedKey}, nil
		}, nil))
	spans := tracetest.NewSpanRecorder()
	var logs bytes.Buffer
	var gopts guard.Options
	if err := (observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Tools: tools}).Apply(&gopts); err != nil {
		t.Fatal(err)
	}
	gopts.SecretKey = []byte(strings.Repeat("k", 32))
	store := memstore.New(memstore.Options{})
	l := agentloop.New(model(w.client), tools, agentloop.Options{Store: store, Guard: gopts})
	res, err := l.Run(testCtx(t), user1, "rotate the billing key")
	if err != nil || res.Status != agentloop.StatusCompleted {
		t.Fatalf("run: %v, %v", res, err)
	}
	reqs := okRequests(w.srv)
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	outs := outputsOf(t, reqs[1])
	hash, _ := guard.SecretHash(gopts.SecretKey, vaultedKey)
	if len(outs) != 1 || !strings.Contains(outs[0].Raw, guard.SecretPlaceholder(hash)) {
		t.Fatalf("the model was sent %v, want the placeholder", outs)
	}
	recs, _, err := store.Audit(context.Background(), user1.TenantID, 0, 10)
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit: %d, %v", len(recs), err)
	}
	audited, _ := json.Marshal(recs)
	var spanText strings.Builder
	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			spanText.WriteString(a.Value.Emit())
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				spanText.WriteString(a.Value.Emit())
			}
		}
	}
	if len(spans.Ended()) == 0 || logs.Len() == 0 {
		t.Fatalf("%d spans, %d bytes of logs: the run was not observed", len(spans.Ended()), logs.Len())
	}
	for where, text := range map[string]string{
		"the provider's next request": string(reqs[1].Body),
		"the audit log":               string(audited),
		"the spans":                   spanText.String(),
		"the logs":                    logs.String(),
		"the transcript":              res.Transcript.String(),
	} {
		if strings.Contains(text, vaultedKey) || strings.Contains(text, "VAULTED") {
			t.Errorf("%s holds the secret", where)
		}
	}
}
