package observe

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
)

// Config selects the signals Apply installs.
type Config struct {
	// TracerProvider records the spans; nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider records the metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives the log records; nil means no logging interceptors.
	Logger *slog.Logger
	// NoTracing and NoMetrics leave those interceptors out.
	NoTracing, NoMetrics bool
	// Options apply to every interceptor (WithTools, WithStatusTool, …).
	Options []Option
}

// Apply appends the interceptors to o.Interceptors and o.StatusInterceptors,
// after any already there: tracing first (outermost, so the others run
// inside the span and log records carry its trace id), then metrics, then
// logging. The error is the metrics API's, for an instrument it refused.
func (c Config) Apply(o *guard.Options) error {
	var (
		in []guard.Interceptor
		st []guard.StatusInterceptor
	)
	if !c.NoTracing {
		in = append(in, Tracing(c.TracerProvider, c.Options...))
		st = append(st, StatusTracing(c.TracerProvider, c.Options...))
	}
	if !c.NoMetrics {
		d, s, err := Metrics(c.MeterProvider, c.Options...)
		if err != nil {
			return err
		}
		in, st = append(in, d), append(st, s)
	}
	if c.Logger != nil {
		d, s := Logging(c.Logger, c.Options...)
		in, st = append(in, d), append(st, s)
	}
	o.Interceptors = append(o.Interceptors, in...)
	o.StatusInterceptors = append(o.StatusInterceptors, st...)
	return nil
}
