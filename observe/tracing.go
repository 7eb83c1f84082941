package observe

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
)

const spanPrefix = "execute_tool"

// Tracing returns an interceptor that records one span per dispatch: an
// INTERNAL span named "execute_tool {tool}" ("execute_tool" alone for a
// name that is not a tool), with the GenAI tool attributes and the guard's
// decision (see the Key constants). A non-OK result sets the span's status
// to Error with error.type = the code. The dispatch runs in the span's
// context, so spans the tool starts are its children.
//
// It records one span per status query too: named "execute_tool {status
// tool}" (Options.StatusTool), with gen_ai.tool.call.id the query's own call
// id, toolguard.operation.id the operation queried, toolguard.operation.tool
// its tool when the StatusCall names one, and the result as for a dispatch.
//
// A nil Options.TracerProvider means otel.GetTracerProvider(), which
// records nothing until a provider is installed.
func Tracing(o Options) guard.Interceptor {
	s := settingsOf(o)
	tracer := tracerOf(o.TracerProvider)
	return interceptor{dispatch: traceDispatch(s, tracer), status: traceStatus(s, tracer)}
}

func traceDispatch(s *settings, tracer trace.Tracer) func(guard.Handler) guard.Handler {
	return func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, call *guard.Call) (res *guard.Result, err error) {
			ref := s.tool(call.Proposal.Name)
			attrs := []attribute.KeyValue{
				keyOperationName.String(spanPrefix),
				keyToolName.String(ref.name),
				keyToolType.String("function"),
				keyAction.String("dispatch"),
			}
			if id := call.Context.CallID; id != "" {
				attrs = append(attrs, keyToolCallID.String(clean(id, maxID)))
			}
			if op := operationID(call); op != "" {
				attrs = append(attrs, keyOperationID.String(clean(op, maxID)))
			}
			if ref.effect != "" {
				attrs = append(attrs, keyEffect.String(ref.effect))
			}
			ctx, span := tracer.Start(ctx, spanName(ref), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
			defer func() {
				ref.settle(call.Proposal.Name, res)
				if ref.unknown {
					span.SetName(spanName(ref))
					span.SetAttributes(keyToolName.String(ref.name))
				}
				endSpan(span, res, err)
			}()
			return next(ctx, call)
		}
	}
}

func traceStatus(s *settings, tracer trace.Tracer) func(guard.StatusHandler) guard.StatusHandler {
	name := clean(s.statusTool, maxName)
	return func(next guard.StatusHandler) guard.StatusHandler {
		return func(ctx context.Context, sc *guard.StatusCall) (res *guard.Result, err error) {
			attrs := []attribute.KeyValue{
				keyOperationName.String(spanPrefix),
				keyToolName.String(name),
				keyToolType.String("function"),
				keyAction.String("query_status"),
				keyOperationID.String(clean(sc.OperationID, maxID)),
			}
			if id := sc.Context.CallID; id != "" {
				attrs = append(attrs, keyToolCallID.String(clean(id, maxID)))
			}
			if sc.Tool != "" {
				attrs = append(attrs, keyOperationTool.String(clean(sc.Tool, maxName)))
			}
			ctx, span := tracer.Start(ctx, spanPrefix+" "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
			defer func() { endSpan(span, res, err) }()
			return next(ctx, sc)
		}
	}
}

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

func spanName(ref toolRef) string {
	if ref.unknown || ref.name == "" {
		return spanPrefix
	}
	return spanPrefix + " " + ref.name
}

// endSpan records the result (never its data or message) and ends the span.
func endSpan(span trace.Span, res *guard.Result, err error) {
	defer span.End()
	switch {
	case err != nil:
		span.SetAttributes(keyHostError.Bool(true), keyErrorType.String("host_error"))
		span.SetStatus(codes.Error, "host error")
		return
	case res == nil:
		// The handler panicked; the panic goes on.
		span.SetAttributes(keyErrorType.String("_OTHER"))
		span.SetStatus(codes.Error, "no result")
		return
	}
	span.SetAttributes(resultAttrs(res)...)
	if res.Code != guard.CodeOK {
		span.SetAttributes(keyErrorType.String(res.Code.String()))
		span.SetStatus(codes.Error, res.Code.String())
	}
}

func resultAttrs(res *guard.Result) []attribute.KeyValue {
	d := res.Delivery
	if d == "" {
		d = guard.DeliveryFresh
	}
	attrs := []attribute.KeyValue{
		keyCode.String(res.Code.String()),
		keyStatus.String(string(res.Status())),
		keyOutcome.String(string(res.Outcome())),
		keyRecovery.String(string(res.Recovery())),
		keyDelivery.String(string(d)),
		keyReplayed.Bool(d == guard.DeliveryLocalReplay),
		keyDecision.String(decision(res)),
	}
	if res.Recovery() == guard.RecoveryRetryAfter && res.RetryAfter > 0 {
		attrs = append(attrs, keyRetryAfterMS.Int64(res.RetryAfter.Milliseconds()))
	}
	if res.OperationID != "" {
		// The operation the model is told to query, which for a retry
		// answered from an earlier record is that record's.
		attrs = append(attrs, keyOperationID.String(clean(res.OperationID, maxID)))
	}
	return attrs
}
