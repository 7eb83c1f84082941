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

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/toolset"
)

const (
	vaultedKey    = "sk-live-VAULTED-KEY-0123456789"
	undeclaredKey = "sk-proj-UNDECLARED-abcdefghij0123456789"
)

type vaultIn struct {
	Service string `json:"service"`
}

type vaultOut struct {
	Service string `json:"service"`
	APIKey  string `json:"api_key" toolguard:"secret"`
	Note    string `json:"note"`
}

// testKeys is a detector of the test's undeclared keys: "sk-proj-" and
// what follows up to a space or quote.
type testKeys struct{}

func (testKeys) Find(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "sk-proj-")
		if i < 0 {
			return out
		}
		end := strings.IndexAny(text[i:], ` ",`)
		if end < 0 {
			end = len(text) - i
		}
		out = append(out, text[i:i+end])
		text = text[i+end:]
	}
}

// TestSecretsNeverLeave: on every provider, a tool returns a secret it
// declares (toolguard:"secret") and, in its text, a key nobody declared,
// which the guard's detector finds. The provider's next request, the audit
// log, the spans, the log lines and the transcript hold placeholders, never
// either value; the model is told a secret was withheld, with its keyed
// hash.
func TestSecretsNeverLeave(t *testing.T) {
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name, step{calls: []stepCall{{"call-1", "read_vault", `{"service":"billing"}`}}}, step{text: "done"})
			tools := toolset.MustNew(toolset.Read("read_vault", "Read a service's API key from the vault.",
				func(context.Context, *guard.Invocation, vaultIn) (vaultOut, error) {
					return vaultOut{Service: "billing", APIKey: vaultedKey, Note: "the old key was " + undeclaredKey + " until today"}, nil
				}, nil))
			spans := tracetest.NewSpanRecorder()
			var logs bytes.Buffer
			var gopts guard.Options
			if err := (observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Tools: tools}).Apply(&gopts); err != nil {
				t.Fatal(err)
			}
			gopts.SecretKey = []byte(strings.Repeat("k", 32))
			gopts.Detector = testKeys{}
			store := memstore.New(memstore.Options{})
			l := agentloop.New(f.model(), tools, agentloop.Options{Store: store, Guard: gopts})
			res, err := l.Run(testCtx(t), user1, "rotate the billing key")
			if err != nil || res.Status != agentloop.StatusCompleted {
				t.Fatalf("run: %v, %v", res, err)
			}
			bodies := f.bodies()
			if len(bodies) != 2 {
				t.Fatalf("%d requests, want 2", len(bodies))
			}
			results := f.results()
			declared, _ := guard.SecretHash(gopts.SecretKey, vaultedKey)
			found, _ := guard.SecretHash(gopts.SecretKey, undeclaredKey)
			if len(results) != 2 || len(results[1]) != 1 {
				t.Fatalf("results = %v", results)
			}
			if data := string(results[1][0].Data); !strings.Contains(data, guard.SecretPlaceholder(declared)) ||
				!strings.Contains(data, guard.SecretPlaceholder(found)) {
				t.Fatalf("the model was sent %s, want both placeholders", data)
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
				"the provider's next request": bodies[1],
				"the audit log":               string(audited),
				"the spans":                   spanText.String(),
				"the logs":                    logs.String(),
				"the transcript":              res.Transcript.String(),
			} {
				for _, secret := range []string{vaultedKey, "VAULTED", undeclaredKey, "UNDECLARED"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds %q", where, secret)
					}
				}
			}
		})
	}
}
