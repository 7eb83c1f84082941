package observe

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
)

// Options configure the interceptors of this package; the zero value means
// the defaults. Options are a struct, as everywhere in this module
// (guard.Options, idem.Options): every setting is a named field whose zero
// value is its default, readable at the call site and in go doc.
type Options struct {
	// TracerProvider records Tracing's spans; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider records Metrics' instruments; nil means
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives Logging's records; nil means slog.Default() for
	// Logging, and no logging interceptor for Apply.
	Logger *slog.Logger
	// NoTracing and NoMetrics leave those interceptors out of Apply.
	NoTracing, NoMetrics bool
	// Tools are the guard's tools, so the interceptors can tell a read
	// from a write (toolguard.tool.effect; toolguard.side_effects counts
	// writes only) and an unknown tool from a known one before the guard
	// answers. Pass the same Tools as to guard.New.
	Tools guard.Tools
	// StatusTool names the status tool the model calls, for status query
	// spans, logs and metrics; default toolset.StatusToolName.
	StatusTool string
	// PrincipalInDebugLogs adds tenant_id and subject_id to Logging's Debug
	// records (never to Warn records, spans or metrics). Off by default:
	// the audit log is where principals are kept.
	PrincipalInDebugLogs bool
}

// Apply appends the interceptors to o.Interceptors, after any already
// there: tracing first (outermost, so the others run inside the span and
// log records carry its trace id), then metrics, then logging when a Logger
// is set. The error is the metrics API's, for an instrument it refused.
func (c Options) Apply(o *guard.Options) error {
	var in []guard.Interceptor
	if !c.NoTracing {
		in = append(in, Tracing(c))
	}
	if !c.NoMetrics {
		m, err := Metrics(c)
		if err != nil {
			return err
		}
		in = append(in, m)
	}
	if c.Logger != nil {
		in = append(in, Logging(c))
	}
	o.Interceptors = append(o.Interceptors, in...)
	return nil
}
