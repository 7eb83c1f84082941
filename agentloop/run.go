package agentloop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
)

// Status says how a run ended.
type Status string

// The run statuses.
const (
	StatusCompleted Status = "completed" // the model gave a final message
	StatusPaused    Status = "paused"    // writes wait for approval: see Result.State
	StatusMaxTurns  Status = "max_turns" // the turn limit was reached
)

// Result is the end of a run (or of the part of it until a pause).
type Result struct {
	RunID  string
	Status Status
	// Output is the model's final text.
	Output string
	Turns  int
	// Pending lists the writes waiting for approval when paused.
	Pending []ApprovalRequest
	// State resumes a paused run (Resume); it marshals to JSON.
	State      *State
	Transcript Transcript
}

// RunOption configures one run.
type RunOption func(*runConfig)

type runConfig struct{ runID string }

// WithRunID sets the run id, from which operation ids and idempotency keys
// are derived. A run restarted with the same id replays what already ran.
// Default: a random id.
func WithRunID(id string) RunOption { return func(c *runConfig) { c.runID = id } }

// Run runs the agent for the principal, which comes from the host's
// session, on the user's input. The error is for failures the model cannot
// be told about: a provider that keeps failing after the client's retries,
// the context's end, a bad principal or configuration. The Result returned
// with an error holds the transcript so far.
func (l *Loop) Run(ctx context.Context, p guard.Principal, input string, opts ...RunOption) (*Result, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.runID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		cfg.runID = "run_" + hex.EncodeToString(b[:])
	}
	st := &State{Version: StateVersion, RunID: cfg.runID, TenantID: p.TenantID, SubjectID: p.SubjectID}
	ctx, span := l.startRun(ctx, st)
	defer span.End()
	l.emit(st, Event{Kind: EventUser, Text: input})
	res, err := l.drive(ctx, p, st, responses.ResponseNewParamsInputUnion{OfString: oai.String(input)})
	endRun(span, res, err)
	return res, err
}

// startRun opens the run's span. It names the agent and the run id, never
// the principal or the user's text.
func (l *Loop) startRun(ctx context.Context, st *State) (context.Context, trace.Span) {
	return l.tracer.Start(ctx, "invoke_agent "+l.agentName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", l.agentName),
			attribute.String("gen_ai.conversation.id", st.RunID),
		))
}

func endRun(span trace.Span, res *Result, err error) {
	if res != nil {
		span.SetAttributes(attribute.String("toolguard.run.status", string(res.Status)), attribute.Int("toolguard.run.turns", res.Turns))
	}
	if err != nil {
		span.SetStatus(codes.Error, "run failed")
		span.SetAttributes(attribute.String("error.type", errorType(err)))
	}
}

func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("http_%d", apiErr.StatusCode)
	}
	return "_OTHER"
}

// Resume continues a paused run with the host's answers to its pending
// approvals: a grant (from Grant, or minted with the same signer key) or a
// denial for each. The principal must be the run's.
func (l *Loop) Resume(ctx context.Context, p guard.Principal, st *State, approvals ...Approval) (*Result, error) {
	if l.err != nil {
		return nil, l.err
	}
	if st == nil || len(st.Pending) == 0 {
		return nil, ErrNotPaused
	}
	if !st.owner(p) {
		return nil, ErrWrongPrincipal
	}
	byCall := map[string]Approval{}
	for _, a := range approvals {
		byCall[a.CallID] = a
	}
	for _, req := range st.Pending {
		if _, ok := byCall[req.CallID]; !ok {
			return nil, missingApproval(req.CallID)
		}
	}
	next := *st
	next.Calls = append([]CallState(nil), st.Calls...)
	next.Transcript = append(Transcript(nil), st.Transcript...)
	next.Pending = nil
	ctx, span := l.startRun(ctx, &next)
	defer span.End()
	for i, c := range next.Calls {
		if c.Output != "" {
			continue
		}
		a := byCall[c.CallID]
		fc := responses.ResponseFunctionToolCall{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}
		var res *guard.Result
		if a.Denied {
			l.emit(&next, Event{Kind: EventDenied, CallID: c.CallID, Tool: c.Name, Text: "host"})
			res = denied()
		} else {
			l.emit(&next, Event{Kind: EventApproved, CallID: c.CallID, Tool: c.Name, Text: "grant"})
			var err error
			if res, err = l.dispatch(ctx, p, &next, c.ResponseID, fc, a.Grant); err != nil {
				return l.result(&next, StatusPaused, ""), err
			}
		}
		l.emit(&next, Event{Kind: EventResult, CallID: c.CallID, Tool: c.Name, Result: []byte(res.String())})
		next.Calls[i].Output = res.String()
	}
	items := make([]responses.ResponseInputItemUnionParam, 0, len(next.Calls))
	for _, c := range next.Calls {
		items = append(items, outputItem(c.CallID, c.Output))
	}
	next.Calls = nil
	res, err := l.drive(ctx, p, &next, responses.ResponseNewParamsInputUnion{OfInputItemList: items})
	endRun(span, res, err)
	return res, err
}

func denied() *guard.Result {
	return &guard.Result{Code: guard.CodeApprovalRequired, Delivery: guard.DeliveryFresh, Message: deniedMessage}
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = oai.String(callID)
	return item
}

func (l *Loop) emit(st *State, e Event) {
	e.Turn = st.Turn
	st.Transcript = append(st.Transcript, e)
	if l.observer != nil {
		l.observer(e)
	}
}

func (l *Loop) result(st *State, status Status, output string) *Result {
	r := &Result{RunID: st.RunID, Status: status, Output: output, Turns: st.Turn, Transcript: st.Transcript}
	if status == StatusPaused {
		r.Pending, r.State = st.Pending, st
	}
	return r
}

// drive runs model turns until a final message, a pause, the turn limit or
// an error.
func (l *Loop) drive(ctx context.Context, p guard.Principal, st *State, input responses.ResponseNewParamsInputUnion) (*Result, error) {
	for {
		if st.Turn >= l.maxTurns {
			return l.result(st, StatusMaxTurns, ""), nil
		}
		params := responses.ResponseNewParams{Model: l.model, Tools: l.defs, Input: input}
		if l.instr != "" {
			params.Instructions = oai.String(l.instr)
		}
		if st.PreviousResponseID != "" {
			params.PreviousResponseID = oai.String(st.PreviousResponseID)
		}
		tctx, tspan := l.tracer.Start(ctx, "chat "+l.model, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "chat"),
				attribute.String("gen_ai.provider.name", "openai"),
				attribute.String("gen_ai.request.model", l.model),
			))
		res, next, err := l.turn(tctx, p, st, params)
		if err != nil {
			tspan.SetStatus(codes.Error, "turn failed")
			tspan.SetAttributes(attribute.String("error.type", errorType(err)))
		}
		tspan.End()
		if err != nil || res != nil {
			return res, err
		}
		input = next
	}
}

// turn is one model turn: the request, then the dispatch of its calls. It
// returns a result when the run ends or pauses, else the next input.
func (l *Loop) turn(ctx context.Context, p guard.Principal, st *State, params responses.ResponseNewParams) (*Result, responses.ResponseNewParamsInputUnion, error) {
	var none responses.ResponseNewParamsInputUnion
	resp, err := l.client.Responses.New(ctx, params)
	if err != nil {
		return l.result(st, "", ""), none, fmt.Errorf("agentloop: turn %d: %w", st.Turn+1, err)
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("gen_ai.response.id", resp.ID), attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens))
	st.Turn++
	st.PreviousResponseID = resp.ID
	text := resp.OutputText()
	if text != "" {
		l.emit(st, Event{Kind: EventMessage, Text: text})
	}
	calls := tgopenai.FunctionCalls(resp)
	if len(calls) == 0 {
		return l.result(st, StatusCompleted, text), none, nil
	}
	items, err := l.handleCalls(ctx, p, st, resp.ID, calls)
	if err != nil {
		return l.result(st, "", ""), none, err
	}
	if len(st.Pending) > 0 {
		return l.result(st, StatusPaused, ""), none, nil
	}
	return nil, responses.ResponseNewParamsInputUnion{OfInputItemList: items}, nil
}

// handleCalls dispatches the calls of one response in order and returns
// their outputs; writes waiting for approval are left in st.Pending.
func (l *Loop) handleCalls(ctx context.Context, p guard.Principal, st *State, respID string, calls []responses.ResponseFunctionToolCall) ([]responses.ResponseInputItemUnionParam, error) {
	st.Calls = st.Calls[:0]
	seen := map[string]bool{}
	for _, c := range calls {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.emit(st, Event{Kind: EventCall, CallID: c.CallID, Tool: c.Name, Arguments: c.Arguments})
		if seen[c.CallID] {
			// One output per call id: a repeated id is answered once.
			continue
		}
		seen[c.CallID] = true
		var res *guard.Result
		if l.statusTool != "" && c.Name == l.statusTool {
			res = l.status(ctx, p, st, tgopenai.Context(respID, c), c.Arguments)
		} else {
			var err error
			if res, err = l.dispatch(ctx, p, st, respID, c, ""); err != nil {
				return nil, err
			}
			if res.Code == guard.CodeApprovalRequired {
				var pending bool
				if res, pending, err = l.approve(ctx, p, st, respID, c); err != nil {
					return nil, err
				}
				if pending {
					st.Calls = append(st.Calls, CallState{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments, ResponseID: respID})
					continue
				}
			}
		}
		l.emit(st, Event{Kind: EventResult, CallID: c.CallID, Tool: c.Name, Result: []byte(res.String())})
		st.Calls = append(st.Calls, CallState{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments, ResponseID: respID, Output: res.String()})
	}
	items := make([]responses.ResponseInputItemUnionParam, 0, len(st.Calls))
	for _, c := range st.Calls {
		items = append(items, outputItem(c.CallID, c.Output))
	}
	return items, nil
}

// operation derives a call's identity within the run: its proposal with
// canonical arguments (the raw text when they do not parse), fingerprint,
// operation id and idempotency key. dispatch and approve both use it, so an
// ApprovalRequest names the operation the guard runs.
type operation struct {
	prop        guard.Proposal
	canonical   bool
	fingerprint string
	id, key     string
}

func (l *Loop) operation(runID string, c responses.ResponseFunctionToolCall) operation {
	op := operation{prop: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)}}
	if args, _, err := canon.Parse(op.prop.Arguments, canon.Limits{}); err == nil {
		op.prop.Arguments, op.canonical = args, true
	}
	op.fingerprint = guard.Fingerprint(c.Name, op.prop.Arguments)
	op.id, op.key = (l.keyFunc())(runID, op.prop, op.fingerprint)
	return op
}

// dispatch runs one call through the guard with the run's keys.
func (l *Loop) dispatch(ctx context.Context, p guard.Principal, st *State, respID string, c responses.ResponseFunctionToolCall, grant string) (*guard.Result, error) {
	call := tgopenai.Call(p, respID, c)
	call.Approval = grant
	op := l.operation(st.RunID, c)
	call.Context.OperationID = op.id
	if t := l.tools.Lookup(c.Name); t != nil && t.Spec().Effect == guard.Write {
		// Reads get no key: reading again later in the run must see
		// fresh data. Writes are once per operation.
		call.Context.IdempotencyKey = op.key
	}
	res, err := l.guard.Dispatch(ctx, call)
	if err == nil && res.Code.Recovery() == guard.RecoveryQueryStatus {
		if _, ok := st.unknown(op.id); !ok {
			st.Unknown = append(st.Unknown, UnknownOperation{OperationID: op.id, Tool: c.Name, IdempotencyKey: call.Context.IdempotencyKey})
		}
	}
	return res, err
}

func (l *Loop) keyFunc() KeyFunc {
	if l.keys != nil {
		return l.keys
	}
	return DeriveKeys
}

// approve handles APPROVAL_REQUIRED: with an Approver, ask now and dispatch
// again with the grant (or tell the model it was denied); without, leave
// the call pending.
func (l *Loop) approve(ctx context.Context, p guard.Principal, st *State, respID string, c responses.ResponseFunctionToolCall) (*guard.Result, bool, error) {
	op := l.operation(st.RunID, c)
	if !op.canonical {
		return nil, false, errors.New("agentloop: approval asked for unparsable arguments")
	}
	req := ApprovalRequest{CallID: c.CallID, Tool: c.Name, Arguments: op.prop.Arguments, Principal: p,
		Fingerprint: op.fingerprint, OperationID: op.id}
	l.emit(st, Event{Kind: EventApprovalRequested, CallID: c.CallID, Tool: c.Name, Arguments: string(op.prop.Arguments)})
	if l.approver == nil {
		st.Pending = append(st.Pending, req)
		return nil, true, nil
	}
	d, err := l.approver.Approve(ctx, req)
	if err != nil || !d.Approved {
		who := d.Approver
		if err != nil {
			who = "nobody (" + err.Error() + ")"
		}
		l.emit(st, Event{Kind: EventDenied, CallID: c.CallID, Tool: c.Name, Text: who})
		return denied(), false, nil
	}
	l.emit(st, Event{Kind: EventApproved, CallID: c.CallID, Tool: c.Name, Text: d.Approver})
	tok, err := l.Grant(req, d.Approver)
	if err != nil {
		return nil, false, err
	}
	res, err := l.dispatch(ctx, p, st, respID, c, tok)
	return res, false, err
}
