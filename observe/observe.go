// Package observe makes a guard observable: OpenTelemetry spans and metrics
// and log/slog records for every dispatch and status query, as guard
// interceptors.
//
//	var opts guard.Options
//	err := observe.Options{
//		TracerProvider: tp,     // nil: otel.GetTracerProvider()
//		MeterProvider:  mp,     // nil: otel.GetMeterProvider()
//		Logger:         logger, // nil: no log records
//		Tools:          tools,
//	}.Apply(&opts)
//	g := guard.New(tools, store, opts)
//
// or, one signal at a time, Tracing, Metrics, Logging: each returns one
// guard.Interceptor that wraps dispatches and status queries alike.
//
// Spans follow the OpenTelemetry GenAI semantic conventions for tool
// execution: one INTERNAL span "execute_tool {tool}" per dispatch, with
// gen_ai.operation.name, gen_ai.tool.name, gen_ai.tool.type and
// gen_ai.tool.call.id, plus toolguard.* attributes for the result and the
// idempotency decision. A status query is a span of the status tool the
// model called (default "query_operation_status", see Options.StatusTool).
//
// Redaction is stricter than the audit record's: no signal carries the
// arguments, the tool's data, the result's message (a schema error may quote
// an argument), tenant or subject ids, roles, approval grants or the
// idempotency key. What is recorded: the tool's name, the provider's call
// id, the operation id, and what the guard decided. See docs/operations.md.
package observe

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// instrumentationName names the tracer and meter of this package.
const instrumentationName = "github.com/toolguard/toolguard/observe"

// otherTool stands for a tool name the guard does not know (UNKNOWN_TOOL) in
// metric attributes, so that names a model invents cannot grow the number of
// time series without bound.
const otherTool = "_OTHER"

// The attribute keys. gen_ai.* and error.type are OpenTelemetry semantic
// conventions; toolguard.* are this package's.
const (
	keyOperationName = attribute.Key("gen_ai.operation.name") // always "execute_tool"
	keyToolName      = attribute.Key("gen_ai.tool.name")
	keyToolType      = attribute.Key("gen_ai.tool.type") // always "function"
	keyToolCallID    = attribute.Key("gen_ai.tool.call.id")
	keyErrorType     = attribute.Key("error.type") // the code, on non-OK results

	keyAction        = attribute.Key("toolguard.action")               // "dispatch" or "query_status", as in the audit record
	keyOperationID   = attribute.Key("toolguard.operation.id")         // the operation (for query_status: the one queried)
	keyOperationTool = attribute.Key("toolguard.operation.tool")       // a status query's StatusCall.Tool, when given
	keyEffect        = attribute.Key("toolguard.tool.effect")          // "read" or "write", with Options.Tools
	keyCode          = attribute.Key("toolguard.code")                 // e.g. "OK", "OUTCOME_UNKNOWN"
	keyStatus        = attribute.Key("toolguard.status")               // succeeded, failed, unknown
	keyOutcome       = attribute.Key("toolguard.outcome")              // committed, not_started, unknown
	keyRecovery      = attribute.Key("toolguard.recovery")             // none, correct_input, …
	keyDelivery      = attribute.Key("toolguard.delivery")             // fresh, local_replay, receipt_reconciled
	keyReplayed      = attribute.Key("toolguard.replayed")             // delivery == local_replay
	keyDecision      = attribute.Key("toolguard.idempotency.decision") // see decision
	keyRetryAfterMS  = attribute.Key("toolguard.retry_after_ms")       // when the result carries one
	keyHostError     = attribute.Key("toolguard.host_error")           // the guard returned an error to the host
)

// The idempotency decisions (decision).
const (
	decisionFresh      = "fresh"       // computed by this dispatch: executed, or failed a check
	decisionReplay     = "replay"      // a stored result returned again (local_replay)
	decisionConflict   = "conflict"    // IDEMPOTENCY_CONFLICT or CALL_ID_CONFLICT, fresh
	decisionInProgress = "in_progress" // IN_PROGRESS: the same operation is running
	decisionUnknown    = "unknown"     // OUTCOME_UNKNOWN, fresh
	decisionReconciled = "reconciled"  // receipt_reconciled (status queries)
)

// decision names what the idempotency store decided for a result, derived
// from its code and delivery: replay, reconciled, conflict, in_progress,
// unknown, or fresh for everything else (including check failures and an
// unreachable store).
func decision(res *guard.Result) string {
	switch {
	case res.Delivery == guard.DeliveryLocalReplay:
		return decisionReplay
	case res.Delivery == guard.DeliveryReceiptReconciled:
		return decisionReconciled
	case res.Code == guard.CodeIdempotencyConflict || res.Code == guard.CodeCallIDConflict:
		return decisionConflict
	case res.Code == guard.CodeInProgress:
		return decisionInProgress
	case res.Code == guard.CodeOutcomeUnknown:
		return decisionUnknown
	}
	return decisionFresh
}

// settings is what every interceptor reads of the Options.
type settings struct {
	tools          guard.Tools
	statusTool     string
	debugPrincipal bool
}

func settingsOf(o Options) *settings {
	s := &settings{tools: o.Tools, statusTool: o.StatusTool, debugPrincipal: o.PrincipalInDebugLogs}
	if s.statusTool == "" {
		s.statusTool = toolset.StatusToolName
	}
	return s
}

// interceptor is a guard.Interceptor made of its two wrappers.
type interceptor struct {
	dispatch func(guard.Handler) guard.Handler
	status   func(guard.StatusHandler) guard.StatusHandler
}

func (i interceptor) WrapDispatch(next guard.Handler) guard.Handler { return i.dispatch(next) }

func (i interceptor) WrapStatus(next guard.StatusHandler) guard.StatusHandler { return i.status(next) }

// toolRef is what the interceptors know of a dispatch's tool.
type toolRef struct {
	name    string // the proposed name, cleaned, for spans and logs
	label   string // the name for metric attributes: otherTool when unknown
	effect  string // "read", "write" or "" when not known
	unknown bool   // known to be unknown
}

// maxName bounds tool names, call ids and operation ids in signals.
const (
	maxName        = 128
	maxUnknownName = 64
	maxID          = 256
)

func (s *settings) tool(name string) toolRef {
	r := toolRef{name: clean(name, maxName), label: clean(name, maxName)}
	if s.tools == nil {
		return r
	}
	t := s.tools.Lookup(name)
	if t == nil {
		r.markUnknown(name)
		return r
	}
	r.effect = t.Spec().Effect.String()
	return r
}

func (r *toolRef) markUnknown(name string) {
	r.name, r.label, r.effect, r.unknown = clean(name, maxUnknownName), otherTool, "", true
}

// settle updates what is known of the tool once the result is: an
// UNKNOWN_TOOL result means the name is not a tool.
func (r *toolRef) settle(name string, res *guard.Result) {
	if !r.unknown && res != nil && res.Code == guard.CodeUnknownTool {
		r.markUnknown(name)
	}
}

// clean makes s valid UTF-8 of at most max bytes.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// operationID is a dispatch's operation id as the guard derives it.
func operationID(call *guard.Call) string {
	if call.Context.OperationID != "" {
		return call.Context.OperationID
	}
	return call.Context.CallID
}

// opKey identifies an operation of a principal without keeping its ids.
func opKey(p guard.Principal, op string) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{p.TenantID, p.SubjectID, op} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}
