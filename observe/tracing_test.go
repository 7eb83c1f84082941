package observe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/observe"
)

func recorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	sr := tracetest.NewSpanRecorder()
	return sr, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// spanByCallID finds the n-th (from 0) ended span of the call id.
func spanByCallID(t *testing.T, spans []sdktrace.ReadOnlySpan, callID string, n int) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if attrs(s)[observe.KeyToolCallID].AsString() == callID {
			if n == 0 {
				return s
			}
			n--
		}
	}
	t.Fatalf("no span for call id %s", callID)
	return nil
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		if v == nil {
			if ok {
				t.Errorf("span %q: %s = %v, want absent", s.Name(), k, g.Emit())
			}
			continue
		}
		if !ok {
			t.Errorf("span %q: %s absent, want %v", s.Name(), k, v)
			continue
		}
		if g.AsInterface() != v {
			t.Errorf("span %q: %s = %#v, want %#v", s.Name(), k, g.AsInterface(), v)
		}
	}
}

func TestTracingSpans(t *testing.T) {
	sr, tp := recorder()
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		return guard.Options{
			Interceptors: []guard.Interceptor{observe.Tracing(observe.Options{TracerProvider: tp, Tools: tools})},
		}
	})
	scenario(t, w)
	spans := sr.Ended()
	// 10 dispatches and status queries, the host error included.
	if len(spans) != 11 {
		t.Fatalf("%d spans, want 11", len(spans))
	}
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %q kind %v, want internal", s.Name(), s.SpanKind())
		}
		wantAttrs(t, s, map[attribute.Key]any{
			observe.KeyOperationName: "execute_tool",
			observe.KeyToolType:      "function",
		})
	}

	read := spanByCallID(t, spans, "call-read", 0)
	if read.Name() != "execute_tool get" {
		t.Errorf("read span name %q", read.Name())
	}
	wantAttrs(t, read, map[attribute.Key]any{
		observe.KeyToolName: "get", observe.KeyAction: "dispatch", observe.KeyOperationID: "call-read",
		observe.KeyEffect: "read", observe.KeyCode: "OK", observe.KeyStatus: "succeeded",
		observe.KeyOutcome: "committed", observe.KeyRecovery: "none", observe.KeyDelivery: "fresh",
		observe.KeyReplayed: false, observe.KeyDecision: "fresh", observe.KeyErrorType: nil,
	})
	if read.Status().Code != codes.Unset {
		t.Errorf("OK span status %v, want unset", read.Status())
	}
	wantAttrs(t, spanByCallID(t, spans, "call-read", 1), map[attribute.Key]any{
		observe.KeyDelivery: "local_replay", observe.KeyReplayed: true, observe.KeyDecision: "replay",
	})

	bad := spanByCallID(t, spans, "call-bad-args", 0)
	wantAttrs(t, bad, map[attribute.Key]any{observe.KeyCode: "INVALID_ARGUMENTS", observe.KeyErrorType: "INVALID_ARGUMENTS",
		observe.KeyRecovery: "correct_input"})
	if bad.Status().Code != codes.Error || bad.Status().Description != "INVALID_ARGUMENTS" {
		t.Errorf("failed span status %v", bad.Status())
	}

	unknownTool := spanByCallID(t, spans, "call-unknown-tool", 0)
	if unknownTool.Name() != "execute_tool" {
		t.Errorf("unknown tool span name %q, want execute_tool", unknownTool.Name())
	}
	wantAttrs(t, unknownTool, map[attribute.Key]any{observe.KeyToolName: "no_such_tool", observe.KeyEffect: nil,
		observe.KeyErrorType: "UNKNOWN_TOOL"})

	wantAttrs(t, spanByCallID(t, spans, "call-write", 0), map[attribute.Key]any{
		observe.KeyToolName: "put", observe.KeyEffect: "write", observe.KeyCode: "OK", observe.KeyDecision: "fresh"})
	wantAttrs(t, spanByCallID(t, spans, "call-conflict", 0), map[attribute.Key]any{
		observe.KeyCode: "IDEMPOTENCY_CONFLICT", observe.KeyDecision: "conflict", observe.KeyRecovery: "human_review",
		observe.KeyErrorType: "IDEMPOTENCY_CONFLICT"})
	for i := range 2 {
		s := spanByCallID(t, spans, "call-unknown", i)
		wantAttrs(t, s, map[attribute.Key]any{observe.KeyCode: "OUTCOME_UNKNOWN", observe.KeyStatus: "unknown",
			observe.KeyOutcome: "unknown", observe.KeyRecovery: "query_status", observe.KeyDecision: "unknown",
			observe.KeyOperationID: "call-unknown", observe.KeyErrorType: "OUTCOME_UNKNOWN"})
		if s.Status().Code != codes.Error {
			t.Errorf("unknown outcome span status %v", s.Status())
		}
	}

	var status []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if attrs(s)[observe.KeyAction].AsString() == "query_status" {
			status = append(status, s)
		}
	}
	if len(status) != 2 {
		t.Fatalf("%d status spans, want 2", len(status))
	}
	for _, s := range status {
		if s.Name() != "execute_tool query_operation_status" {
			t.Errorf("status span name %q", s.Name())
		}
		wantAttrs(t, s, map[attribute.Key]any{observe.KeyToolName: "query_operation_status",
			observe.KeyOperationID: "call-unknown", observe.KeyCode: "OK"})
		if id := attrs(s)[observe.KeyToolCallID].AsString(); !strings.HasPrefix(id, "status-") {
			t.Errorf("status span call id %q", id)
		}
	}
	wantAttrs(t, status[0], map[attribute.Key]any{observe.KeyDelivery: "receipt_reconciled", observe.KeyDecision: "reconciled"})
	wantAttrs(t, status[1], map[attribute.Key]any{observe.KeyDelivery: "local_replay", observe.KeyDecision: "replay"})

	var host sdktrace.ReadOnlySpan
	for _, s := range spans {
		if attrs(s)[observe.KeyHostError].AsBool() {
			host = s
		}
	}
	if host == nil {
		t.Fatal("no span marks the host error")
	}
	wantAttrs(t, host, map[attribute.Key]any{observe.KeyErrorType: "host_error", observe.KeyCode: nil})
	if host.Status().Code != codes.Error {
		t.Errorf("host error span status %v", host.Status())
	}

	assertNoSecretsInSpans(t, spans)
}

func assertNoSecretsInSpans(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, string(kv.Key), kv.Value.Emit())
		}
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, secret) {
				t.Errorf("span %q leaks %q", s.Name(), text)
			}
		}
	}
}

func TestTracingWithoutToolsNamesUnknownToolsAfterwards(t *testing.T) {
	sr, tp := recorder()
	w := newWorld(t, func(guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{observe.Tracing(observe.Options{TracerProvider: tp})}}
	})
	w.Dispatch(t, principal, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c1"})
	w.Dispatch(t, principal, guardtest.Req{Tool: "no_such_tool", Args: `{}`, CallID: "c2"})
	long := strings.Repeat("x", 300)
	w.Dispatch(t, principal, guardtest.Req{Tool: long, Args: `{}`, CallID: "c3"})
	spans := sr.Ended()
	if spans[0].Name() != "execute_tool get" {
		t.Errorf("span name %q", spans[0].Name())
	}
	wantAttrs(t, spans[0], map[attribute.Key]any{observe.KeyEffect: nil})
	if spans[1].Name() != "execute_tool" || spans[2].Name() != "execute_tool" {
		t.Errorf("unknown tool span names %q, %q", spans[1].Name(), spans[2].Name())
	}
	if n := len(attrs(spans[2])[observe.KeyToolName].AsString()); n != 64 {
		t.Errorf("unknown tool name kept at %d bytes, want 64", n)
	}
}

// The dispatch runs in the span's context: the tool's spans are children.
func TestTracingContextCarriesSpan(t *testing.T) {
	sr, tp := recorder()
	var inner trace.SpanContext
	w := newWorld(t, func(guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{
			observe.Tracing(observe.Options{TracerProvider: tp}),
			guard.InterceptorFunc(func(next guard.Handler) guard.Handler {
				return func(ctx context.Context, call *guard.Call) (*guard.Result, error) {
					inner = trace.SpanContextFromContext(ctx)
					return next(ctx, call)
				}
			}),
		}}
	})
	ctx, parent := tp.Tracer("test").Start(context.Background(), "agent turn")
	_, err := w.Guard.Dispatch(ctx, guard.Call{Principal: principal,
		Proposal: guard.Proposal{Name: "get", Arguments: []byte(`{"key":"k"}`)},
		Context:  guard.ExecutionContext{CallID: "c1"}})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	span := spanByCallID(t, sr.Ended(), "c1", 0)
	if !inner.Equal(span.SpanContext()) {
		t.Errorf("the handler's context holds span %v, want the dispatch span %v", inner.SpanID(), span.SpanContext().SpanID())
	}
	if span.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("dispatch span's parent %v, want the caller's %v", span.Parent().SpanID(), parent.SpanContext().SpanID())
	}
}

func TestTracingRetryAfter(t *testing.T) {
	sr, tp := recorder()
	w := newWorld(t, func(guard.Tools) guard.Options {
		return guard.Options{
			Interceptors: []guard.Interceptor{observe.Tracing(observe.Options{TracerProvider: tp})},
			Checks: []guard.Check{func(context.Context, *guard.Invocation) error {
				return guard.RateLimited(1500*time.Millisecond, nil)
			}},
		}
	})
	guardtest.Want(t, w.Dispatch(t, principal, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c1"}), guard.CodeRateLimit, guard.DeliveryFresh)
	wantAttrs(t, sr.Ended()[0], map[attribute.Key]any{observe.KeyCode: "RATE_LIMIT", observe.KeyRetryAfterMS: int64(1500),
		observe.KeyRecovery: "retry_after", observe.KeyErrorType: "RATE_LIMIT"})
}

// A nil provider is the global one.
func TestTracingNilProviderIsGlobal(t *testing.T) {
	sr, tp := recorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	w := newWorld(t, func(guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{observe.Tracing(observe.Options{StatusTool: "ask_status"})}}
	})
	w.Dispatch(t, principal, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c1"})
	w.Status(t, principal, "nope")
	spans := sr.Ended()
	if len(spans) != 2 || spans[0].Name() != "execute_tool get" || spans[1].Name() != "execute_tool ask_status" {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, spans[1], map[attribute.Key]any{observe.KeyCode: "NOT_FOUND", observe.KeyOperationID: "nope"})
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%q", s.Name()))
	}
	return out
}
