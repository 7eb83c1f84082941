package observe

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
)

// The log messages.
const (
	logDispatch = "toolguard dispatch"
	logStatus   = "toolguard query_status"
)

// Logging returns an interceptor that writes one record per dispatch and per
// status query to logger: at Debug when the result is OK, at Warn when it
// is not (any other code) or when the guard returned an error to the host.
// Attributes: tool, call_id, operation_id, code, delivery, recovery,
// decision, duration, retry_after_ms and effect where they apply, trace_id
// and span_id when the context carries a span (put Tracing before Logging),
// error for a host error, and for a status query queried_tool when the
// StatusCall names one.
//
// Never the arguments, the tool's data or the result's message (a schema
// error may quote an argument). Tenant and subject ids are not logged unless
// Options.PrincipalInDebugLogs is set, and then only on Debug records. A nil
// Options.Logger means slog.Default().
func Logging(o Options) guard.Interceptor {
	s := settingsOf(o)
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	statusTool := clean(s.statusTool, maxName)

	dispatch := func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, call *guard.Call) (*guard.Result, error) {
			start := time.Now()
			res, err := next(ctx, call)
			level := levelOf(res, err)
			if !logger.Enabled(ctx, level) {
				return res, err
			}
			ref := s.tool(call.Proposal.Name)
			ref.settle(call.Proposal.Name, res)
			attrs := make([]slog.Attr, 0, 16)
			attrs = append(attrs, slog.String("tool", ref.name))
			if ref.effect != "" {
				attrs = append(attrs, slog.String("effect", ref.effect))
			}
			attrs = append(attrs, slog.String("call_id", clean(call.Context.CallID, maxID)))
			op := operationID(call)
			if res != nil && res.OperationID != "" {
				op = res.OperationID
			}
			attrs = append(attrs, slog.String("operation_id", clean(op, maxID)))
			attrs = appendOutcome(attrs, res, err, time.Since(start))
			attrs = appendTrace(ctx, attrs)
			if level < slog.LevelWarn && s.debugPrincipal {
				attrs = appendPrincipal(attrs, call.Principal)
			}
			logger.LogAttrs(ctx, level, logDispatch, attrs...)
			return res, err
		}
	}

	status := func(next guard.StatusHandler) guard.StatusHandler {
		return func(ctx context.Context, sc *guard.StatusCall) (*guard.Result, error) {
			start := time.Now()
			res, err := next(ctx, sc)
			level := levelOf(res, err)
			if !logger.Enabled(ctx, level) {
				return res, err
			}
			attrs := make([]slog.Attr, 0, 16)
			attrs = append(attrs, slog.String("tool", statusTool))
			if sc.Tool != "" {
				attrs = append(attrs, slog.String("queried_tool", clean(sc.Tool, maxName)))
			}
			attrs = append(attrs,
				slog.String("call_id", clean(sc.Context.CallID, maxID)),
				slog.String("operation_id", clean(sc.OperationID, maxID)))
			attrs = appendOutcome(attrs, res, err, time.Since(start))
			attrs = appendTrace(ctx, attrs)
			if level < slog.LevelWarn && s.debugPrincipal {
				attrs = appendPrincipal(attrs, sc.Principal)
			}
			logger.LogAttrs(ctx, level, logStatus, attrs...)
			return res, err
		}
	}
	return interceptor{dispatch: dispatch, status: status}
}

func levelOf(res *guard.Result, err error) slog.Level {
	if err != nil || res == nil || res.Code != guard.CodeOK {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

func appendOutcome(attrs []slog.Attr, res *guard.Result, err error, d time.Duration) []slog.Attr {
	if err != nil || res == nil {
		attrs = append(attrs, slog.Duration("duration", d))
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		return attrs
	}
	attrs = append(attrs,
		slog.String("code", res.Code.String()),
		slog.String("delivery", string(deliveryOf(res))),
		slog.String("recovery", string(res.Recovery())),
		slog.String("decision", decision(res)),
		slog.Duration("duration", d))
	if res.Recovery() == guard.RecoveryRetryAfter && res.RetryAfter > 0 {
		attrs = append(attrs, slog.Int64("retry_after_ms", res.RetryAfter.Milliseconds()))
	}
	return attrs
}

func appendTrace(ctx context.Context, attrs []slog.Attr) []slog.Attr {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return attrs
}

func appendPrincipal(attrs []slog.Attr, p guard.Principal) []slog.Attr {
	return append(attrs, slog.String("tenant_id", clean(p.TenantID, maxID)), slog.String("subject_id", clean(p.SubjectID, maxID)))
}
