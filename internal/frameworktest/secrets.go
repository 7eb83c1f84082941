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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/toolguard/toolguard/guard"
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
// behind a guard on guard.MemStore whose options declare the secret key and
// the SecretKeys detector, observed (observe.Options.Apply) into a span
// recorder and a JSON log. (The recorder is SpanText's and not the
// OpenTelemetry SDK's so that the nested modules, whose go.mod does not
// require the SDK, can use it.)
type Secrets struct {
	Tools   *toolset.Set
	Store   *guard.MemStore
	Guard   *guard.Guard
	Options guard.Options // the guard's, SecretKey among them
	Reads   atomic.Int64  // how often VaultTool ran

	spans SpanText
	logs  lockedBuffer
}

// NewSecrets returns a fresh Secrets.
func NewSecrets(t testing.TB) *Secrets {
	t.Helper()
	s := &Secrets{Store: guard.NewMemStore(guard.MemStoreOptions{})}
	s.Tools = toolset.MustNew(toolset.Read(VaultTool, "Read a service's API key from the vault.",
		func(context.Context, *guard.Invocation, VaultIn) (VaultOut, error) {
			s.Reads.Add(1)
			return VaultOut{Service: "billing", APIKey: DeclaredSecret, Note: "the old key was " + UndeclaredSecret + " until today"}, nil
		}, nil))
	if err := (observe.Options{TracerProvider: &s.spans,
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
	logs := s.logs.String()
	spans, ended := s.spans.Text()
	if ended == 0 || logs == "" {
		t.Fatalf("%d spans, %d bytes of logs: the call was not observed", ended, len(logs))
	}
	all := map[string]string{"the audit log": string(audited), "the spans": spans, "the logs": logs}
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

// SpanText is a trace.TracerProvider that records, as text, everything
// the spans of its tracers were given: names, attributes (at the start
// and later), events and their attributes, errors, status descriptions.
// It keeps more than an exporter would get, never less.
type SpanText struct {
	embedded.TracerProvider
	mu    sync.Mutex
	b     strings.Builder
	ended int
}

// Text returns the text recorded and how many spans ended.
func (r *SpanText) Text() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String(), r.ended
}

func (r *SpanText) write(parts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range parts {
		r.b.WriteString(p)
	}
	r.b.WriteByte('\n')
}

func (r *SpanText) writeAttrs(kv []attribute.KeyValue) {
	for _, a := range kv {
		r.write(string(a.Key), "=", a.Value.Emit())
	}
}

// Tracer implements trace.TracerProvider.
func (r *SpanText) Tracer(string, ...trace.TracerOption) trace.Tracer { return textTracer{r: r} }

type textTracer struct {
	embedded.Tracer
	r *SpanText
}

func (t textTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.r.write("span ", name)
	c := trace.NewSpanStartConfig(opts...)
	t.r.writeAttrs(c.Attributes())
	sp := &textSpan{r: t.r}
	return trace.ContextWithSpan(ctx, sp), sp
}

type textSpan struct {
	embedded.Span
	r *SpanText
}

func (s *textSpan) End(...trace.SpanEndOption) {
	s.r.mu.Lock()
	s.r.ended++
	s.r.mu.Unlock()
}

func (s *textSpan) AddEvent(name string, opts ...trace.EventOption) {
	s.r.write("event ", name)
	c := trace.NewEventConfig(opts...)
	s.r.writeAttrs(c.Attributes())
}

func (s *textSpan) AddLink(l trace.Link) { s.r.writeAttrs(l.Attributes) }

func (s *textSpan) IsRecording() bool { return true }

func (s *textSpan) RecordError(err error, opts ...trace.EventOption) {
	if err != nil {
		s.r.write("error ", err.Error())
	}
	c := trace.NewEventConfig(opts...)
	s.r.writeAttrs(c.Attributes())
}

func (s *textSpan) SpanContext() trace.SpanContext { return trace.SpanContext{} }

func (s *textSpan) SetStatus(_ codes.Code, description string) { s.r.write("status ", description) }

func (s *textSpan) SetName(name string) { s.r.write("name ", name) }

func (s *textSpan) SetAttributes(kv ...attribute.KeyValue) { s.r.writeAttrs(kv) }

func (s *textSpan) TracerProvider() trace.TracerProvider { return s.r }
