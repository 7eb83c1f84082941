package observe_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/observe"
)

type logRecord map[string]any

func (r logRecord) str(k string) string { s, _ := r[k].(string); return s }

func jsonLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level}))
}

func records(t *testing.T, buf *bytes.Buffer) []logRecord {
	t.Helper()
	var out []logRecord
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r logRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func byCallID(t *testing.T, recs []logRecord, callID string) []logRecord {
	t.Helper()
	var out []logRecord
	for _, r := range recs {
		if r.str("call_id") == callID {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no record for call id %s", callID)
	}
	return out
}

func TestLogging(t *testing.T) {
	var buf bytes.Buffer
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{observe.Logging(observe.Options{Logger: jsonLogger(&buf, slog.LevelDebug), Tools: tools})}}
	})
	scenario(t, w)
	recs := records(t, &buf)
	if len(recs) != 11 {
		t.Fatalf("%d records, want one per dispatch and query (11):\n%s", len(recs), buf.String())
	}

	read := byCallID(t, recs, "call-read")
	if len(read) != 2 {
		t.Fatalf("%d records for call-read", len(read))
	}
	r := read[0]
	for k, want := range map[string]string{"level": "DEBUG", "msg": observe.LogDispatch, "tool": "get", "effect": "read",
		"operation_id": "call-read", "code": "OK", "delivery": "fresh", "recovery": "none", "decision": "fresh"} {
		if got := r.str(k); got != want {
			t.Errorf("read record %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := r["duration"].(float64); !ok {
		t.Errorf("read record has no duration: %v", r)
	}
	if read[1].str("decision") != "replay" || read[1].str("level") != "DEBUG" {
		t.Errorf("replay record %v", read[1])
	}

	for call, code := range map[string]string{"call-bad-args": "INVALID_ARGUMENTS", "call-unknown-tool": "UNKNOWN_TOOL",
		"call-conflict": "IDEMPOTENCY_CONFLICT", "call-unknown": "OUTCOME_UNKNOWN"} {
		for _, r := range byCallID(t, recs, call) {
			if r.str("level") != "WARN" || r.str("code") != code {
				t.Errorf("%s: level %s code %s, want WARN %s", call, r.str("level"), r.str("code"), code)
			}
		}
	}
	if got := byCallID(t, recs, "call-unknown")[0].str("recovery"); got != "query_status" {
		t.Errorf("unknown outcome recovery %q", got)
	}

	var status, host []logRecord
	for _, r := range recs {
		if r.str("msg") == observe.LogStatus {
			status = append(status, r)
		}
		if r.str("error") != "" {
			host = append(host, r)
		}
	}
	if len(status) != 2 || status[0].str("tool") != "query_operation_status" || status[0].str("operation_id") != "call-unknown" ||
		status[0].str("delivery") != "receipt_reconciled" || status[0].str("level") != "DEBUG" {
		t.Errorf("status records %v", status)
	}
	if len(host) != 1 || host[0].str("level") != "WARN" || host[0].str("code") != "" {
		t.Errorf("host error records %v", host)
	}
	for _, r := range recs {
		if _, ok := r["tenant_id"]; ok {
			t.Errorf("tenant id logged without PrincipalInDebugLogs: %v", r)
		}
		if _, ok := r["message"]; ok {
			t.Errorf("result message logged: %v", r)
		}
	}
	if strings.Contains(buf.String(), secret) {
		t.Errorf("the log leaks a secret:\n%s", buf.String())
	}
}

func TestLoggingLevels(t *testing.T) {
	var buf bytes.Buffer
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{observe.Logging(observe.Options{Logger: jsonLogger(&buf, slog.LevelWarn), Tools: tools})}}
	})
	scenario(t, w)
	recs := records(t, &buf)
	// Only the failures: bad args, unknown tool, conflict, two unknowns, host error.
	if len(recs) != 6 {
		t.Fatalf("%d records at Warn, want 6:\n%s", len(recs), buf.String())
	}
}

func TestLoggingPrincipalInDebugOnly(t *testing.T) {
	var buf bytes.Buffer
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		return guard.Options{Interceptors: []guard.Interceptor{observe.Logging(observe.Options{
			Logger: jsonLogger(&buf, slog.LevelDebug), Tools: tools, PrincipalInDebugLogs: true})}}
	})
	scenario(t, w)
	for _, r := range records(t, &buf) {
		_, has := r["tenant_id"]
		if debug := r.str("level") == "DEBUG"; has != debug {
			t.Errorf("level %s record has tenant id: %v", r.str("level"), has)
		}
		if has && (r.str("tenant_id") != secretTenant || r.str("subject_id") != secretSubject) {
			t.Errorf("principal logged as %q/%q", r.str("tenant_id"), r.str("subject_id"))
		}
	}
}

// Config.Apply installs tracing outermost: log records carry the span's ids.
func TestConfigApply(t *testing.T) {
	var buf bytes.Buffer
	sr, tp := recorder()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	existing := guard.InterceptorFunc(func(next guard.Handler) guard.Handler { return next })
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		opts := guard.Options{Interceptors: []guard.Interceptor{existing}}
		err := observe.Options{TracerProvider: tp, MeterProvider: mp, Logger: jsonLogger(&buf, slog.LevelDebug),
			Tools: tools}.Apply(&opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(opts.Interceptors) != 4 {
			t.Fatalf("%d interceptors, want the existing one and 3", len(opts.Interceptors))
		}
		return opts
	})
	scenario(t, w)
	spans := sr.Ended()
	recs := records(t, &buf)
	if len(spans) != 11 || len(recs) != 11 {
		t.Fatalf("%d spans, %d records", len(spans), len(recs))
	}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext().TraceID().String()+"/"+s.SpanContext().SpanID().String()] = true
	}
	for _, r := range recs {
		if !ids[r.str("trace_id")+"/"+r.str("span_id")] {
			t.Errorf("record %v names no recorded span", r)
		}
	}
	c, _ := collect(t, reader)
	if n := c.total(observe.MetricDispatches); n != 8 {
		t.Errorf("%v dispatches counted, want 8", n)
	}
	assertNoSecretsInSpans(t, spans)
	assertNoSecretsInMetrics(t, c)
	if strings.Contains(buf.String(), secret) {
		t.Errorf("the log leaks a secret:\n%s", buf.String())
	}

	var none guard.Options
	if err := (observe.Options{NoTracing: true, NoMetrics: true}).Apply(&none); err != nil || len(none.Interceptors) != 0 {
		t.Errorf("an empty config installed %d interceptors (%v)", len(none.Interceptors), err)
	}
}
