package frameworktest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/toolset"
)

// The secrets an entry point's leak test makes a tool return: one the tool
// declares (toolguard:"secret"), and one nobody declared, inside ordinary
// text, which only the guard's Detector (SecretKeys) finds.
const (
	DeclaredSecret   = "sk-live-VAULTED-KEY-0123456789"
	UndeclaredSecret = "sk-proj-UNDECLARED-abcdefghij0123456789"
)

// VaultTool is the tool of the leak tests: a read, "read_vault", that
// takes VaultIn and answers VaultOut.
const VaultTool = "read_vault"

// VaultArguments are the arguments a scripted model calls VaultTool with.
const VaultArguments = `{"service":"billing"}`

// VaultIn is VaultTool's input.
type VaultIn struct {
	Service string `json:"service"`
}

// VaultOut is VaultTool's output: the service's key, a declared secret,
// and a note that holds an undeclared one.
type VaultOut struct {
	Service string `json:"service"`
	APIKey  string `json:"api_key" toolguard:"secret"`
	Note    string `json:"note"`
}

// SecretKeys is the leak tests' detector of undeclared keys: "sk-proj-"
// and what follows up to a space, quote or comma.
type SecretKeys struct{}

// Find implements guard.Detector.
func (SecretKeys) Find(text string) []string {
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

// SecretsUser is who the leak tests' calls act for.
var SecretsUser = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}

// Secrets is what an entry point's leak test runs against: VaultTool
// behind a guard on memstore whose options declare the secret key and
// the SecretKeys detector, observed (observe.Options.Apply) into a span
// recorder and a JSON log.
type Secrets struct {
	Tools   *toolset.Set
	Store   *memstore.Store
	Guard   *guard.Guard
	Options guard.Options // the guard's, SecretKey among them
	Reads   atomic.Int64  // how often VaultTool ran

	spans *tracetest.SpanRecorder
	logs  lockedBuffer
}

// NewSecrets returns a fresh Secrets.
func NewSecrets(t testing.TB) *Secrets {
	t.Helper()
	s := &Secrets{Store: memstore.New(memstore.Options{}), spans: tracetest.NewSpanRecorder()}
	s.Tools = toolset.MustNew(toolset.Read(VaultTool, "Read a service's API key from the vault.",
		func(context.Context, *guard.Invocation, VaultIn) (VaultOut, error) {
			s.Reads.Add(1)
			return VaultOut{Service: "billing", APIKey: DeclaredSecret, Note: "the old key was " + UndeclaredSecret + " until today"}, nil
		}, nil))
	if err := (observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans)),
		Logger: slog.New(slog.NewJSONHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Tools: s.Tools}).Apply(&s.Options); err != nil {
		t.Fatal(err)
	}
	s.Options.SecretKey = bytes.Repeat([]byte("k"), 32)
	s.Options.Detector = SecretKeys{}
	s.Guard = guard.New(s.Tools, s.Store, s.Options)
	return s
}

// Placeholders are what the model is given instead of DeclaredSecret and
// UndeclaredSecret.
func (s *Secrets) Placeholders(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, v := range []string{DeclaredSecret, UndeclaredSecret} {
		h, err := guard.SecretHash(s.Options.SecretKey, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, guard.SecretPlaceholder(h))
	}
	return out
}

// WantWithheld checks, byte for byte, that neither secret (nor the
// distinctive middle of either) is in what the entry point gave its model
// or client (given, by what each text is), in the audit log, the spans or
// the log lines, and that each given text holds both placeholders
// instead. The tool must have run, and been audited and observed.
func (s *Secrets) WantWithheld(t testing.TB, given map[string]string) {
	t.Helper()
	if n := s.Reads.Load(); n == 0 {
		t.Fatalf("%s never ran", VaultTool)
	}
	for where, text := range given {
		for _, p := range s.Placeholders(t) {
			if !strings.Contains(text, p) {
				t.Errorf("%s lacks the placeholder %s: %s", where, p, text)
			}
		}
	}
	recs, _, err := s.Store.Audit(context.Background(), SecretsUser.TenantID, 0, 100)
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	audited, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var spans strings.Builder
	for _, sp := range s.spans.Ended() {
		spans.WriteString(sp.Name())
		for _, a := range sp.Attributes() {
			spans.WriteString(string(a.Key) + "=" + a.Value.Emit() + "\n")
		}
		for _, e := range sp.Events() {
			spans.WriteString(e.Name)
			for _, a := range e.Attributes {
				spans.WriteString(string(a.Key) + "=" + a.Value.Emit() + "\n")
			}
		}
		spans.WriteString(sp.Status().Description)
	}
	logs := s.logs.String()
	if len(s.spans.Ended()) == 0 || logs == "" {
		t.Fatalf("%d spans, %d bytes of logs: the call was not observed", len(s.spans.Ended()), len(logs))
	}
	all := map[string]string{"the audit log": string(audited), "the spans": spans.String(), "the logs": logs}
	for where, text := range given {
		all[where] = text
	}
	for where, text := range all {
		for _, secret := range []string{DeclaredSecret, "VAULTED", UndeclaredSecret, "UNDECLARED"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", where, secret)
			}
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
