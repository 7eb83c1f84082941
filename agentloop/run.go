package agentloop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/provider"
)

// RunStatus says how a run ended. A host tests it: only StatusCompleted means
// the model gave its final answer.
type RunStatus string

// The run statuses.
const (
	StatusCompleted RunStatus = "completed" // the model gave a final message
	StatusPaused    RunStatus = "paused"    // writes wait for approval: see RunResult.State
	StatusMaxTurns  RunStatus = "max_turns" // the turn limit was reached
	// StatusIncomplete: the reply was cut short (an output token limit,
	// the context window; Responses status incomplete, Chat
	// finish_reason length, Anthropic max_tokens). Its calls did not run.
	StatusIncomplete RunStatus = "incomplete"
	// StatusRefused: the model or a content filter refused (Chat
	// finish_reason content_filter or a refusal, Anthropic refusal).
	StatusRefused RunStatus = "refused"
	// StatusFailed: the provider reports the response failed.
	StatusFailed RunStatus = "failed"
)

// RunResult is the end of a run (or of the part of it until a pause).
type RunResult struct {
	RunID  string
	Status RunStatus
	// Reason is the provider's word for an ending other than completed
	// (e.g. "max_tokens", "content_filter"), "" otherwise.
	Reason string
	// Output is the model's final text.
	Output string
	Turns  int
	// Pending lists the writes waiting for approval when paused.
	Pending []host.ApprovalRequest
	// State resumes a paused run (Resume); it marshals to JSON.
	State      *State
	Transcript Transcript
}

// RunOptions configures one run. Its zero value gives the run a random id.
type RunOptions struct {
	// RunID is the run id, from which operation ids and idempotency keys
	// are derived: a run restarted with the same id replays what already
	// ran. "" means a random id.
	RunID string
}

// Run runs the agent for the principal, which comes from the host's
// session, on the user's input; opts, at most one, configures the run. The
// error is for failures the model cannot be told about: a provider that
// keeps failing after the client's retries, the context's end, a bad
// principal or configuration. The Result returned with an error holds the
// transcript so far.
func (l *Loop) Run(ctx context.Context, p guard.Principal, input string, opts ...RunOptions) (*RunResult, error) {
	return l.start(ctx, p, input, opts, nil)
}

// Stream is Run yielding the run's events as they happen: the transcript's
// events, text deltas (EventText) as the provider streams them, and last an
// EventEnd whose Run is the Result. A tool call is yielded, and dispatched,
// once the reply that carries it is complete, so its arguments are. An
// error is yielded last, as Run would return it (after an EventEnd when the
// run has a status to report, as a Resume that fails mid-way does).
// Breaking out of the loop cancels the run: no further request is sent.
func (l *Loop) Stream(ctx context.Context, p guard.Principal, input string, opts ...RunOptions) iter.Seq2[Event, error] {
	return l.stream(ctx, func(ctx context.Context, sink func(Event)) (*RunResult, error) {
		return l.start(ctx, p, input, opts, sink)
	})
}

// ResumeStream is Resume yielding events as Stream does.
func (l *Loop) ResumeStream(ctx context.Context, p guard.Principal, st *State, approvals ...Approval) iter.Seq2[Event, error] {
	return l.stream(ctx, func(ctx context.Context, sink func(Event)) (*RunResult, error) {
		return l.resume(ctx, p, st, approvals, sink)
	})
}

func (l *Loop) stream(ctx context.Context, run func(context.Context, func(Event)) (*RunResult, error)) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		open := true
		sink := func(e Event) {
			if open && !yield(e, nil) {
				open = false
				cancel()
			}
		}
		res, err := run(ctx, sink)
		if res != nil && res.Status != "" {
			sink(Event{Kind: EventEnd, Turn: res.Turns, Text: string(res.Status), Run: res})
		}
		if err != nil && open {
			yield(Event{}, err)
		}
	}
}

// run is one run in progress: its state and where its events go.
type run struct {
	l    *Loop
	p    guard.Principal
	st   *State
	sink func(Event) // Stream's consumer, nil for Run
	// mu guards st.Unknown while a reply's calls run at once (dispatch.go).
	mu sync.Mutex
	// emitMu makes one event at a time reach the transcript and the sink.
	emitMu sync.Mutex
}

func (l *Loop) start(ctx context.Context, p guard.Principal, input string, opts []RunOptions, sink func(Event)) (*RunResult, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var o RunOptions
	if len(opts) > 0 {
		o = opts[len(opts)-1]
	}
	if o.RunID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		o.RunID = "run_" + hex.EncodeToString(b[:])
	}
	st := &State{Version: stateVersion, RunID: o.RunID, TenantID: p.TenantID, SubjectID: p.SubjectID, API: l.info.APIFamily}
	r := &run{l: l, p: p, st: st, sink: sink}
	ctx, span := l.startRun(ctx, st)
	defer span.End()
	r.emit(Event{Kind: EventUser, Text: input})
	st.Items = append(st.Items, l.provider.UserItem(input))
	res, err := r.drive(ctx)
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

func endRun(span trace.Span, res *RunResult, err error) {
	if res != nil {
		span.SetAttributes(attribute.String("toolguard.run.status", string(res.Status)), attribute.Int("toolguard.run.turns", res.Turns))
	}
	if err != nil {
		span.SetStatus(codes.Error, "run failed")
		span.SetAttributes(attribute.String("error.type", provider.ErrorType(err)))
	}
}

// Resume continues a paused run with the host's answers to its pending
// approvals: a grant (from Grant, or minted with the same signer key) or a
// denial for each. The principal must be the run's, and the loop's
// provider the one the run was started with.
func (l *Loop) Resume(ctx context.Context, p guard.Principal, st *State, approvals ...Approval) (*RunResult, error) {
	return l.resume(ctx, p, st, approvals, nil)
}

func (l *Loop) resume(ctx context.Context, p guard.Principal, st *State, approvals []Approval, sink func(Event)) (*RunResult, error) {
	if l.err != nil {
		return nil, l.err
	}
	if st == nil || len(st.Pending) == 0 {
		return nil, ErrNotPaused
	}
	if !st.owner(p) {
		return nil, ErrWrongPrincipal
	}
	if st.API != "" && st.API != l.info.APIFamily {
		return nil, fmt.Errorf("%w: the run was started on %s, this loop runs %s", ErrOtherProvider, st.API, l.info.APIFamily)
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
	next.Items = append([]json.RawMessage(nil), st.Items...)
	next.Transcript = append(Transcript(nil), st.Transcript...)
	next.Pending = nil
	r := &run{l: l, p: p, st: &next, sink: sink}
	ctx, span := l.startRun(ctx, &next)
	defer span.End()
	for i, c := range next.Calls {
		if c.Output != "" {
			continue
		}
		a := byCall[c.CallID]
		call := provider.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments, Kind: c.Kind}
		var res *guard.Result
		if a.Denied {
			r.emit(Event{Kind: EventDenied, CallID: c.CallID, Tool: c.Name, Text: orDefault(a.Approver, "host")})
			if a.Expired {
				res = guard.Expired()
			} else {
				r.deny(call)
				res = guard.Declined(a.Reason)
			}
		} else {
			r.emit(Event{Kind: EventApproved, CallID: c.CallID, Tool: c.Name, Text: orDefault(a.Approver, "grant")})
			var err error
			if res, err = r.dispatch(ctx, c.ResponseID, call, a.Grant); err != nil {
				return l.result(&next, StatusPaused, ""), err
			}
		}
		r.emit(Event{Kind: EventResult, CallID: c.CallID, Tool: c.Name, Result: []byte(res.String())})
		next.Calls[i].Output = res.String()
	}
	r.answer()
	res, err := r.drive(ctx)
	endRun(span, res, err)
	return res, err
}

func (r *run) emit(e Event) {
	// Events come from the reply's stream, its calls running at once and
	// its early reads: one at a time.
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.emitLocked(r.st.Turn, e)
}

// emitTurn emits an event of the given turn: an early read's, whose reply
// is still streaming when it runs.
func (r *run) emitTurn(turn int, e Event) {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.emitLocked(turn, e)
}

func (r *run) emitLocked(turn int, e Event) {
	e.Turn = turn
	if e.Kind != EventText {
		r.st.Transcript = append(r.st.Transcript, e)
		if r.l.observer != nil {
			r.l.observer(e)
		}
	}
	if r.sink != nil {
		r.sink(e)
	}
}

func (l *Loop) result(st *State, status RunStatus, output string) *RunResult {
	r := &RunResult{RunID: st.RunID, Status: status, Output: output, Turns: st.Turn, Transcript: st.Transcript}
	if status == StatusPaused {
		r.Pending, r.State = st.Pending, st
	}
	return r
}

// drive runs model turns until a final message, a pause, the turn limit, a
// reply that did not end normally, or an error.
func (r *run) drive(ctx context.Context) (*RunResult, error) {
	l, st := r.l, r.st
	for {
		if st.Turn >= l.maxTurns {
			return l.result(st, StatusMaxTurns, ""), nil
		}
		tctx, tspan := l.tracer.Start(ctx, "chat "+l.info.Model, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "chat"),
				attribute.String("gen_ai.provider.name", l.info.Provider),
				attribute.String("gen_ai.request.model", l.info.Model),
			))
		res, err := r.turn(tctx)
		if err != nil {
			tspan.SetStatus(codes.Error, "turn failed")
			tspan.SetAttributes(attribute.String("error.type", provider.ErrorType(err)))
		}
		tspan.End()
		if err != nil || res != nil {
			return res, err
		}
	}
}

// ErrProviderPanic is the error of a run whose provider panicked during a
// turn (an SDK that could not read what the API sent, say): the run ends
// with it, and nothing of that reply runs but the reads it had dispatched
// early, whose results go nowhere.
var ErrProviderPanic = errors.New("agentloop: the provider panicked")

// askModel asks p for one reply, turning a panic into ErrProviderPanic, so
// that none reaches the host, and a nil reply into an error.
func askModel(ctx context.Context, p provider.Provider, req provider.Request) (rep *provider.Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			rep, err = nil, fmt.Errorf("%w: %v", ErrProviderPanic, v)
		}
	}()
	rep, err = p.Turn(ctx, req)
	if err == nil && rep == nil {
		err = errors.New("agentloop: the provider returned no reply and no error")
	}
	return rep, err
}

// turn is one model turn: the request, then the dispatch of its calls. It
// returns a result when the run ends or pauses, and nil to go on.
func (r *run) turn(ctx context.Context) (*RunResult, error) {
	l, st := r.l, r.st
	req := provider.Request{Instructions: l.instr, Tools: l.offered, Items: st.Items, Chain: st.Chain}
	var ahead *early
	if r.sink != nil {
		req.Text = func(delta string) { r.emit(Event{Kind: EventText, Text: delta}) }
		ahead = newEarly(ctx, r)
		req.Ready = ahead.ready
	}
	rep, err := askModel(ctx, l.provider, req)
	if err != nil {
		ahead.settle("the reply failed")
		return l.result(st, "", ""), fmt.Errorf("agentloop: turn %d: %w", st.Turn+1, err)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.response.id", rep.ID),
		attribute.String("gen_ai.response.model", rep.Model),
		attribute.Int64("gen_ai.usage.input_tokens", rep.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", rep.OutputTokens))
	r.emitMu.Lock() // early reads emit meanwhile
	st.Turn++
	r.emitMu.Unlock()
	if rep.Chain != "" {
		st.Chain, st.Items = rep.Chain, nil
	} else {
		st.Chain = ""
		st.Items = append(st.Items, rep.Items...)
	}
	if rep.Text != "" {
		r.emit(Event{Kind: EventMessage, Text: rep.Text})
	}
	if rep.End != provider.EndNormal {
		ahead.settle("the reply ended " + string(rep.End))
		res := l.result(st, RunStatus(rep.End), rep.Text)
		res.Reason = rep.Reason
		if rep.End == provider.EndFailed && rep.Err != nil {
			return res, fmt.Errorf("agentloop: turn %d: %w", st.Turn, rep.Err)
		}
		return res, nil
	}
	if rep.Continue || len(rep.Calls) == 0 {
		ahead.settle("the reply carried no such call")
		if rep.Continue {
			return nil, nil
		}
		return l.result(st, StatusCompleted, rep.Text), nil
	}
	err = r.handleCalls(ctx, rep.ID, rep.Calls, ahead)
	ahead.settle("the reply carried no such call")
	if err != nil {
		return l.result(st, "", ""), err
	}
	if len(st.Pending) > 0 {
		return l.result(st, StatusPaused, ""), nil
	}
	r.answer()
	return nil, nil
}

// answer adds the answers to the turn's calls to the conversation.
func (r *run) answer() {
	outs := make([]provider.Output, 0, len(r.st.Calls))
	for _, c := range r.st.Calls {
		outs = append(outs, provider.Output{CallID: c.CallID, Name: c.Name, Kind: c.Kind, Result: c.Output, OK: resultOK(c.Output)})
	}
	r.st.Items = append(r.st.Items, r.l.provider.OutputItems(outs)...)
	r.st.Calls = nil
}

// resultOK reports whether a model result's code is OK.
func resultOK(result string) bool {
	var r guard.Result
	return r.UnmarshalJSON([]byte(result)) == nil && r.Code == guard.CodeOK
}

// operation derives a call's identity within the run: its proposal with
// canonical arguments (the raw text when they do not parse), fingerprint,
// operation id and idempotency key ("" for a read, and for a Repeatable
// write, whose id is its call id). dispatch and approve both use it, so an
// ApprovalRequest names the operation the guard runs.
type operation struct {
	prop        guard.Proposal
	canonical   bool
	fingerprint string
	id, key     string
}

func (l *Loop) operation(runID string, c provider.ToolCall) operation {
	op := operation{prop: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)}}
	if args, _, err := canon.Parse(op.prop.Arguments, canon.Limits{}); err == nil {
		op.prop.Arguments, op.canonical = args, true
	}
	op.fingerprint = guard.Fingerprint(c.Name, op.prop.Arguments)
	t := l.tools.Lookup(c.Name)
	write := t != nil && t.Spec().Effect == guard.Write
	if write && t.Spec().Repeatable {
		// Identical repeats are meant: each call is its own operation.
		op.id = guard.SafeID(c.ID)
		return op
	}
	op.id, op.key = l.keys(runID, op.prop, op.fingerprint)
	if !write {
		// Reads get no key: reading again later in the run must see
		// fresh data. Writes are once per operation.
		op.key = ""
	}
	return op
}

// dispatch runs one call through the guard with the run's keys.
func (r *run) dispatch(ctx context.Context, respID string, c provider.ToolCall, grant string) (*guard.Result, error) {
	l, st := r.l, r.st
	call := guard.Call{Principal: r.p, Proposal: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)},
		Context: l.info.Context(respID, c.ID), Approval: grant}
	op := l.operation(st.RunID, c)
	call.Context.OperationID, call.Context.IdempotencyKey = op.id, op.key
	// The run is the scope: a tool's budget per run (guard.Budget) counts
	// here. (The ids above are the run's already.)
	call.Context.Scope = guard.SafeID(st.RunID)
	res, err := l.guard.Dispatch(ctx, call)
	if err == nil && res.Code.Recovery() == guard.RecoveryQueryStatus {
		// Calls of one reply run at once: the run's state is shared.
		r.mu.Lock()
		if _, ok := st.unknown(op.id); !ok {
			st.Unknown = append(st.Unknown, unknownOperation{OperationID: op.id, Tool: c.Name, IdempotencyKey: call.Context.IdempotencyKey})
		}
		r.mu.Unlock()
	}
	return res, err
}

// deny records that a human declined the call's intent in this run, so it
// is not put to a human again (contract section 4).
func (r *run) deny(c provider.ToolCall) {
	if op := r.l.operation(r.st.RunID, c); !slices.Contains(r.st.Denied, op.fingerprint) {
		r.st.Denied = append(r.st.Denied, op.fingerprint)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// approve handles APPROVAL_REQUIRED: with an Approver, ask now and dispatch
// again with the grant (or tell the model it was denied); without, leave
// the call pending.
func (r *run) approve(ctx context.Context, respID string, c provider.ToolCall, emit func(Event)) (*guard.Result, *host.ApprovalRequest, error) {
	l, st := r.l, r.st
	op := l.operation(st.RunID, c)
	if !op.canonical {
		return nil, nil, errors.New("agentloop: approval asked for unparsable arguments")
	}
	if slices.Contains(st.Denied, op.fingerprint) {
		// A human already said no to this very intent in this run: the
		// same answer, without asking again.
		emit(Event{Kind: EventDenied, CallID: c.ID, Tool: c.Name, Text: "the human's earlier answer in this run"})
		return guard.Declined(""), nil, nil
	}
	req := host.ApprovalRequest{RunID: st.RunID, CallID: c.ID, Tool: c.Name, Arguments: op.prop.Arguments, Principal: r.p,
		Fingerprint: op.fingerprint, OperationID: op.id}
	emit(Event{Kind: EventApprovalRequested, CallID: c.ID, Tool: c.Name, Arguments: string(op.prop.Arguments)})
	if l.approver == nil {
		return nil, &req, nil
	}
	d, err := l.approver.Approve(ctx, req)
	if err != nil || !d.Approved {
		who := d.Approver
		if err != nil {
			who = "nobody (" + err.Error() + ")"
		}
		emit(Event{Kind: EventDenied, CallID: c.ID, Tool: c.Name, Text: who})
		if (err == nil && d.Expired) || errors.Is(err, context.DeadlineExceeded) {
			// Nobody decided in time: not a no, and the model is told so.
			return guard.Expired(), nil, nil
		}
		if err == nil {
			// A human said no (not a failed request).
			st.Denied = append(st.Denied, op.fingerprint)
		}
		return guard.Declined(d.Reason), nil, nil
	}
	emit(Event{Kind: EventApproved, CallID: c.ID, Tool: c.Name, Text: d.Approver})
	tok, err := l.Grant(req, d.Approver)
	if err != nil {
		return nil, nil, err
	}
	res, err := r.dispatch(ctx, respID, c, tok)
	return res, nil, err
}
