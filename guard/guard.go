// Package guard sits between a language model's tool calls and the systems
// those calls change. Every call is typed, checked, authorized, approved
// where it must be, executed at most once, audited, and answered with a
// structured result the model can act on.
//
// One dispatch takes this path (the order of checks of the contract):
//
//  1. call id binding, 2. idempotency key (both applied atomically by the
//     Store, so they win over everything below),
//  3. tool lookup, 4. argument validation (the tool's JSON Schema),
//  5. authorization, 6. approval, then any extra Checks,
//  7. execute (a write under a reservation), then commit the result and its
//     audit record together.
//
// A read runs first and is bound in one store step; a write reserves, runs
// and commits. Checks 3–6 run before the store is asked, and a failure is
// recorded through the same store step, which still applies checks 1–2
// first; the model sees exactly what the contract's order prescribes.
package guard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolguard/toolguard/internal/canon"
)

// Check is an extra step run after approval and before execution. It
// returns nil to let the call through, or an error whose code (CodeOf) is
// the result; errors without a code fail closed as NOT_FOUND.
type Check func(ctx context.Context, inv *Invocation) error

// Options configure a Guard. The zero value means the defaults.
type Options struct {
	// Clock is the guard's time; default SystemClock.
	Clock Clock
	// Signer verifies approval grants. Without one, every write that
	// needs approval fails with APPROVAL_INVALID when a grant is given and
	// APPROVAL_REQUIRED when not.
	Signer *Signer
	// Lease is how long a write's reservation holds before a dead
	// holder's write is declared unknown; default 30s. Tools run under
	// the caller's context: bound it. A tool that outlives its lease is
	// safe (others see the outcome unknown, and its late commit stores
	// the truth), but keep the lease above your tools' usual latency.
	Lease time.Duration
	// CommitTimeout bounds a write's commit, which must outlive the
	// caller's deadline (the write ran: its outcome must be stored); the
	// commit is retried within it; default 10s. A caller's context that
	// can never end (context.Background) needs no such bound: each try is
	// bounded by the store client's own timeouts.
	CommitTimeout time.Duration
	// MaxArgumentBytes bounds the arguments' size; default 512 KiB.
	MaxArgumentBytes int
	// MaxDepth bounds the arguments' nesting; default 64.
	MaxDepth int
	// Checks run in order after approval.
	Checks []Check
	// Interceptors wrap Dispatch and QueryStatus; the first listed runs
	// first (outermost).
	Interceptors []Interceptor
	// SecretKey keys the hashes of declared secrets (SecretHash): the
	// audit record's and the placeholders'. Keep it with the signing key;
	// an auditor needs it to check a known value against a record. Empty:
	// a random key of this guard's, so hashes are stable only within the
	// process and no auditor can check them.
	SecretKey []byte
	// Detector, if set, finds secrets the tools did not declare in their
	// outputs (and receipts), which are withheld as declared ones are. Nil:
	// only declared secrets are withheld.
	Detector Detector
	// TenantBudget bounds what each tenant spends in a period across all
	// tools (budget.go); the zero value bounds nothing.
	TenantBudget TenantBudget
}

// Guard dispatches tool calls. It is safe for concurrent use.
type Guard struct {
	tools    Tools
	store    Store
	opts     Options
	secrets  *Redactor // the key of secret hashes and the detector (secret.go)
	limits   canon.Limits
	dispatch Handler
	status   StatusHandler
}

// New returns a guard over the tools and the store.
func New(tools Tools, store Store, opts Options) *Guard {
	if opts.Clock == nil {
		opts.Clock = SystemClock
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 10 * time.Second
	}
	g := &Guard{tools: tools, store: store, opts: opts, secrets: NewRedactor(opts.SecretKey, opts.Detector),
		limits: canon.Limits{MaxBytes: opts.MaxArgumentBytes, MaxDepth: opts.MaxDepth}}
	g.dispatch, g.status = g.dispatchCall, g.queryStatus
	for i := len(opts.Interceptors) - 1; i >= 0; i-- {
		g.dispatch = opts.Interceptors[i].WrapDispatch(g.dispatch)
		g.status = opts.Interceptors[i].WrapStatus(g.status)
	}
	return g
}

// Tools returns the guard's tools.
func (g *Guard) Tools() Tools { return g.tools }

// Store returns the guard's store.
func (g *Guard) Store() Store { return g.store }

// Dispatch runs one call through the guard and returns the result for the
// model. The error is for the host only and is returned solely for a
// programming error, before anything is stored or run: an invalid principal
// (ErrBadPrincipal), ids that are too long or not UTF-8 (ErrBadID), a write
// with no identity (ErrNoIdentity). Everything that can happen to a call,
// including an unreachable store, is a Result.
func (g *Guard) Dispatch(ctx context.Context, call Call) (*Result, error) {
	return g.dispatch(ctx, &call)
}

func (g *Guard) dispatchCall(ctx context.Context, call *Call) (res *Result, err error) {
	if err := call.Principal.Validate(); err != nil {
		return nil, err
	}
	if err := call.Context.validate(); err != nil {
		return nil, err
	}
	// The invocation and its store entry live and die together: one
	// allocation for both.
	st := &struct {
		inv Invocation
		e   Entry
	}{}
	inv, e := &st.inv, &st.e
	g.identify(call, inv)
	if inv.tool != nil && inv.tool.Spec().Effect == Write && inv.opID == "" && inv.idemKey == "" {
		return nil, ErrNoIdentity
	}
	g.fillEntry(e, inv, "dispatch")
	if code, ferr := g.check(ctx, inv); code != 0 {
		e.setError(code, ferr)
		return g.finish(ctx, e)
	}
	tool := inv.tool
	charge, code, cerr := g.budgetCharge(inv)
	if code != 0 {
		e.setError(code, cerr)
		return g.finish(ctx, e)
	}
	if tool.Spec().Effect != Write {
		if charge != nil {
			if code, cerr := g.chargeRead(ctx, charge); code != 0 {
				e.setError(code, cerr)
				return g.finish(ctx, e)
			}
		}
		out, xerr := g.execute(ctx, tool, inv)
		e.setOutcome(out, xerr, Read)
		if e.Code.Outcome() == OutcomeNotStarted {
			g.refund(ctx, charge)
		}
		return g.finish(ctx, e)
	}
	e.seal()
	e.Token = reservationToken(call.Step, e.IdempotencyKey)
	if gr := inv.Grant; gr != nil {
		e.GrantID, e.GrantExpiresAt = gr.ID, gr.ExpiresAt
	}
	if charge != nil {
		// The reservation takes the charge, and its commit settles it.
		charge.Token, e.Charge = e.Token, charge
	}
	if tool.Spec().Transactional {
		return g.runTx(ctx, call, tool, inv, e)
	}
	rctx, cancel := reserveContext(ctx)
	answer, err := g.store.Reserve(rctx, e, g.opts.Lease)
	cancel()
	if err != nil {
		// The reservation may have been stored with its reply lost: it
		// did not run, so release it (and give its charge back) before
		// saying so, unless the store refused before sending anything.
		if !errors.Is(err, ErrStoreRefused) {
			g.release(ctx, e)
		}
		return storeUnavailable(), nil
	}
	if answer != nil {
		// A replay, or an answer from the store: nothing ran.
		if call.Step != "" && answer.Code == CodeUnavailable {
			// This step's token reserved the key in an earlier run of the
			// step, whose write was committed or released since (Store:
			// Reserve is idempotent per token): the step gets what any
			// dispatch of the key gets now.
			return g.rerun(ctx, e)
		}
		return answer, nil
	}
	switch {
	case e.MayBeLost && mayHaveRun(ctx, tool, inv):
		// The store lost records of this tenant: this write may be one of
		// them, run before. Its outcome is unknown, and nothing runs now.
		e.setError(CodeOutcomeUnknown, NewError(CodeOutcomeUnknown, MayBeLostMessage))
	case call.Step != "" && !e.Reserved:
		// The reservation stood already: this step's earlier run made it
		// (and its charge) and died, and may have run the write.
		g.settleOwn(ctx, tool, inv, e)
	default:
		out, xerr := g.execute(ctx, tool, inv)
		e.setOutcome(out, xerr, Write)
	}
	return g.commit(ctx, e)
}

// runTx runs a transactional write (ToolSpec.Transactional) inside the
// store's transaction (TxStore.RunTx): its rows, the reservation, the
// outcome and its audit record commit together, so a failure of the tool
// is a write that did not happen, and the outcome is never unknown. On a
// store that cannot hold it, it does not run: UNAVAILABLE.
func (g *Guard) runTx(ctx context.Context, call *Call, tool Tool, inv *Invocation, e *Entry) (*Result, error) {
	ts, ok := g.store.(TxStore)
	if !ok {
		e.setError(CodeUnavailable, nil)
		return g.finish(ctx, e)
	}
	ran := false
	res, err := ts.RunTx(ctx, e, g.opts.Lease, func(ctx context.Context) {
		ran = true
		out, xerr := g.execute(ctx, tool, inv)
		e.setTxOutcome(out, xerr)
	})
	if err != nil {
		return storeUnavailable(), nil
	}
	if !ran && call.Step != "" && res.Code == CodeUnavailable {
		// As for other writes: this step's token reserved the key in an
		// earlier run of the step, committed since.
		return g.rerun(ctx, e)
	}
	return res, nil
}

// MayBeLostMessage is the message of the OUTCOME_UNKNOWN a write gets when
// the store lost records of its tenant (Entry.MayBeLost) and the tool's
// receipt lookup found the operation or could not say.
const MayBeLostMessage = "This operation's record may have been lost by the store, and it may have run before: " +
	"it was not run again. Query its status to learn its outcome."

// mayHaveRun asks the tool's receipt lookup whether a write whose record
// may have been lost ran before: only a receipt that is absent says it did
// not.
func mayHaveRun(ctx context.Context, tool Tool, inv *Invocation) bool {
	r, _ := lookupReceipt(ctx, tool, inv)
	return r != ReceiptAbsent
}

// reservationToken returns a write's reservation token: a fresh random one
// for a dispatch, or for a durable step's call (Call.Step) one derived
// from the step and the write's effective key, the same each time the
// step runs, so that the step run again finds its own reservation.
func reservationToken(step, key string) string {
	if step == "" {
		return newToken()
	}
	h := sha256.New()
	h.Write([]byte("toolguard step token\x00"))
	h.Write([]byte(step))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// settleOwn decides the outcome of a write whose reservation a durable
// step made in an earlier run that died (Call.Step) and may have run it,
// as a status query settles an unknown outcome (docs/contract.md, "Unknown
// outcomes"): the tool's receipt under the same downstream key decides.
// Found, the write took place and the receipt is its result. Absent, it
// did not take place and runs now, once: the step owns the reservation,
// so nobody else runs it, and a late arrival of the dead run's request is
// deduplicated downstream by the same key. Inconclusive (no receipt
// lookup, or it failed), the outcome is unknown, and never run blind.
func (g *Guard) settleOwn(ctx context.Context, tool Tool, inv *Invocation, e *Entry) {
	switch receipt, data := lookupReceipt(ctx, tool, inv); receipt {
	case ReceiptFound:
		e.setOutcome(data, nil, Write)
	case ReceiptAbsent:
		out, xerr := g.execute(ctx, tool, inv)
		e.setOutcome(out, xerr, Write)
	default:
		e.setError(CodeOutcomeUnknown, nil)
		e.SideEffect = SideEffectUnknown
	}
}

// rerunMessage is the answer to a durable step run again whose earlier
// run's write ended without starting (its reservation was released).
const rerunMessage = "This step ran before and the action did not start; nothing was executed. It may be tried again."

// rerun answers a durable step whose earlier run's reservation was
// committed or released since: through the store's checks of the call id
// and the key, as a dispatch that reserves nothing (a replay of the
// committed result, OUTCOME_UNKNOWN for an unknown one), or, when they
// find nothing live (the write was released: it never started), that
// nothing was executed.
func (g *Guard) rerun(ctx context.Context, e *Entry) (*Result, error) {
	e.setError(CodeUnavailable, nil)
	e.Message = rerunMessage
	return g.finish(ctx, e)
}

// commit stores a write's outcome. The write already ran, so a store that
// fails here must not make the model retry blind: after a few tries the
// model is told the outcome is unknown, and the reservation's lease turns
// the record unknown for everyone else too. The write ran whatever the
// caller's deadline said, so the commit has its own (CommitTimeout).
func (g *Guard) commit(ctx context.Context, e *Entry) (*Result, error) {
	if ctx.Done() != nil {
		// The caller's context may end: the commit must not end with it.
		// (A context that cannot end costs nothing to keep: each attempt
		// is then bounded by the store client's own timeouts.)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), g.opts.CommitTimeout)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		res, err := g.store.Commit(ctx, e)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, ErrStoreRefused) || attempt == 2 || !pause(ctx, time.Duration(attempt+1)*20*time.Millisecond) {
			break
		}
	}
	return &Result{Code: CodeOutcomeUnknown, Delivery: DeliveryFresh,
		Message: CodeOutcomeUnknown.DefaultMessage(), OperationID: e.OperationID}, nil
}

// releaseGrace is the part of a caller's deadline kept for releasing a
// reservation whose reply was lost (at most a quarter of what is left when
// the reservation is sent), and the bound of a release whose caller's
// context ended without a deadline.
const releaseGrace = 500 * time.Millisecond

// reserveContext is the caller's context for a reservation, ending early
// enough that a release still fits in the caller's deadline: a dispatch
// answers UNAVAILABLE within the deadline, its release included.
func reserveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	keep := min(releaseGrace, time.Until(deadline)/4)
	return context.WithDeadline(ctx, deadline.Add(-keep))
}

// release frees a reservation the guard could not confirm, by its token:
// a commit of UNAVAILABLE, audited like any outcome. It is retried within
// the caller's deadline (reserveContext kept part of it for this); a
// caller that cancelled leaves it releaseGrace, within that deadline. Where
// it cannot reach the store either, the reservation's lease runs out, and
// a status query settles it from the tool's receipt (docs/contract.md).
func (g *Guard) release(ctx context.Context, e *Entry) {
	e.setError(CodeUnavailable, nil)
	e.Message = unavailableMessage
	if ctx.Err() != nil {
		// The caller went away (cancelled): the release still runs, for
		// releaseGrace, never past the caller's deadline.
		end := time.Now().Add(releaseGrace)
		if d, ok := ctx.Deadline(); ok && d.Before(end) {
			end = d
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), end)
		defer cancel()
	}
	for attempt := 0; attempt < 3; attempt++ {
		_, err := g.store.Commit(ctx, e)
		if err == nil || errors.Is(err, ErrStoreRefused) || !pause(ctx, time.Duration(attempt+1)*20*time.Millisecond) {
			return
		}
	}
}

// pause sleeps for d unless ctx ends first; it reports whether ctx is
// still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// newToken returns a fresh reservation token.
func newToken() string {
	var t [16]byte
	_, _ = rand.Read(t[:])
	return hex.EncodeToString(t[:])
}
func (g *Guard) finish(ctx context.Context, e *Entry) (*Result, error) {
	res, err := g.store.Finish(ctx, e)
	if err != nil {
		return storeUnavailable(), nil
	}
	return res, nil
}

const unavailableMessage = "The idempotency store is unavailable; nothing was executed."

func storeUnavailable() *Result {
	return &Result{Code: CodeUnavailable, Delivery: DeliveryFresh, Message: unavailableMessage, RetryAfter: time.Second}
}

// identify prepares inv for call and gives it the operation it runs as:
// its tool, and a write's scope ids (applyScope).
func (g *Guard) identify(call *Call, inv *Invocation) {
	g.prepare(call, inv)
	inv.tool = g.tools.Lookup(inv.Proposal.Name)
	inv.applyScope()
}

// OperationID returns the operation id the guard runs call as: the host's
// operation id; else, for a write in a scope with no idempotency key whose
// tool is not Repeatable, the scope's (ScopeIDs); else the call id. A host
// that asks a human before the call is dispatched names with it the
// operation the grant will pay for.
func (g *Guard) OperationID(call Call) string {
	var inv Invocation
	g.identify(&call, &inv)
	return inv.opID
}

// prepare canonicalizes the arguments and derives the ids.
func (g *Guard) prepare(call *Call, inv *Invocation) {
	*inv = Invocation{
		Principal: call.Principal,
		Proposal:  call.Proposal,
		Context:   call.Context,
		Now:       g.opts.Clock.Now(),
		approval:  call.Approval,
		secrets:   g.secrets,
	}
	c, v, err := canon.Parse(call.Proposal.Arguments, g.limits)
	inv.Arguments, inv.args, inv.argsErr = c, v, err
	inv.Fingerprint = fingerprint(call.Proposal.Name, call.Proposal.Arguments, c, err)
	inv.opID = call.Context.OperationID
	if inv.opID == "" {
		inv.opID = call.Context.CallID
	}
	if k := call.Context.IdempotencyKey; k != "" {
		inv.idemKey = "k:" + k
	}
}

// check runs steps 3–6 and the extra checks. It returns 0 when the call may
// execute, with inv.tool and inv.Input set.
func (g *Guard) check(ctx context.Context, inv *Invocation) (Code, error) {
	tool := inv.tool
	if tool == nil {
		return CodeUnknownTool, nil
	}
	if tool.Spec().Effect == Write && inv.idemKey == "" && inv.opID != "" {
		// A write always runs under a key: without one, the operation id
		// is the key, in a namespace of its own.
		inv.idemKey = "o:" + inv.opID
	}
	if inv.idemKey != "" {
		inv.IdempotencyKey = downstreamKey(inv.Principal, inv.idemKey)
	}
	if inv.argsErr != nil {
		return CodeInvalidArguments, argumentsError(inv.argsErr)
	}
	input, err := safeDecode(tool, inv)
	if err != nil {
		if c, ok := CodeOf(err); ok && c == CodeInvalidArguments {
			return CodeInvalidArguments, err
		}
		return CodeInvalidArguments, nil
	}
	inv.Input = input
	if err := authorize(ctx, tool, inv); err != nil {
		return failClosed(err)
	}
	if spec := tool.Spec(); spec.Effect == Write && spec.NeedsApproval {
		if inv.approval == "" {
			return CodeApprovalRequired, nil
		}
		if g.opts.Signer == nil {
			return CodeApprovalInvalid, nil
		}
		grant, err := g.opts.Signer.check(inv.approval, inv.Principal, tool.Spec().Name, inv.Fingerprint, inv.Now)
		if err != nil {
			return CodeApprovalInvalid, nil
		}
		inv.Grant = grant
	}
	for _, c := range g.opts.Checks {
		if err := safeRun(func() error { return c(ctx, inv) }); err != nil {
			return failClosed(err)
		}
	}
	return 0, nil
}

// failClosed maps an authorization or check failure to its code: the
// error's own code for the few a check may claim, NOT_FOUND otherwise.
func failClosed(err error) (Code, error) {
	if c, ok := CodeOf(err); ok {
		switch c {
		case CodeNotFound, CodeRateLimit, CodeApprovalRequired, CodeApprovalInvalid, CodeInvalidArguments, CodeUnavailable:
			return c, err
		}
	}
	return CodeNotFound, nil
}

func argumentsError(err error) error {
	var ce *canon.Error
	if errors.As(err, &ce) {
		return NewError(CodeInvalidArguments, "The arguments are not a valid JSON object: "+ce.Error()+".")
	}
	return NewError(CodeInvalidArguments, "")
}

func safeDecode(tool Tool, inv *Invocation) (in any, err error) {
	defer func() {
		if r := recover(); r != nil {
			in, err = nil, NewError(CodeInvalidArguments, "")
		}
	}()
	return tool.Decode(inv.Arguments, inv.args)
}

// safeRun runs f and turns a panic into an error.
func safeRun(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("guard: panic: %v", r)
		}
	}()
	return f()
}

// execute runs the tool, its output secrets replaced by their
// placeholders.
func (g *Guard) execute(ctx context.Context, tool Tool, inv *Invocation) (json.RawMessage, error) {
	inv.outSecrets = nil
	out, err := execute(ctx, tool, inv)
	runtime := inv.withheld()
	if err == nil {
		spec := tool.Spec()
		out = g.secrets.output(spec.Name, spec.SecretOutput, runtime, out)
	}
	return out, err
}

func execute(ctx context.Context, tool Tool, inv *Invocation) (out json.RawMessage, err error) {
	defer recoverTo(&err)
	return tool.Execute(ctx, inv)
}

func authorize(ctx context.Context, tool Tool, inv *Invocation) (err error) {
	defer recoverTo(&err)
	return tool.AuthorizeCall(ctx, inv)
}

// recoverTo turns a panic into *err; deferred directly, so no closure is
// allocated on the hot path.
func recoverTo(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("guard: panic: %v", r)
	}
}

// entry starts the store entry of an invocation.
func (g *Guard) entry(inv *Invocation, action string) *Entry {
	e := new(Entry)
	g.fillEntry(e, inv, action)
	return e
}

func (g *Guard) fillEntry(e *Entry, inv *Invocation, action string) {
	*e = Entry{
		TenantID:       inv.Principal.TenantID,
		SubjectID:      inv.Principal.SubjectID,
		CallID:         inv.Context.CallID,
		OperationID:    inv.opID,
		IdempotencyKey: inv.idemKey,
		Tool:           inv.Proposal.Name,
		Fingerprint:    inv.Fingerprint,
		Effect:         Read,
		Now:            inv.Now,
		SideEffect:     SideEffectNone,
		inv:            inv,
		action:         action,
	}
}

func (e *Entry) setError(code Code, err error) {
	e.Code = code
	e.Message = code.DefaultMessage()
	// A typed error's message and wait apply only to the code it claimed
	// and got: a tool's text never rides on a code the guard chose.
	var ge *Error
	if errors.As(err, &ge) && ge.code == code {
		if ge.message != "" {
			// The message is shown to the model and stored: a tool's text
			// (an upstream error's, say) passes the redaction first.
			e.Message = e.inv.secrets.message(e.inv, ge.message, e.Message)
		}
		e.RetryAfter = ge.retryAfter
	}
	e.seal()
}

// setOutcome records what a tool's execution produced.
func (e *Entry) setOutcome(out json.RawMessage, err error, effect Effect) {
	if err != nil {
		code := classify(err, effect)
		if code == CodeOutcomeUnknown {
			e.SideEffect = SideEffectUnknown
		}
		e.setError(code, err)
		return
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	e.Code, e.Data = CodeOK, out
	if effect == Write {
		e.SideEffect = SideEffectYes
	}
	e.seal()
}

// setTxOutcome records what a transactional write's execution produced.
// Its rows commit only with an OK outcome, so a failure is a write that
// did not happen: the code a tool's typed error claims where a read's may
// (NOT_FOUND, RATE_LIMIT, …), else UNAVAILABLE; never OUTCOME_UNKNOWN,
// and no side effect.
func (e *Entry) setTxOutcome(out json.RawMessage, err error) {
	if err != nil {
		e.setError(classify(err, Read), err)
		return
	}
	e.setOutcome(out, nil, Write)
}

// seal completes the entry once the outcome is known: the tool's effect,
// the effective idempotency key and the audit body.
func (e *Entry) seal() {
	if e.AuditBody != nil {
		return // the body depends only on the checked call, done once
	}
	inv := e.inv
	if inv.tool != nil {
		e.Effect = inv.tool.Spec().Effect
	}
	e.IdempotencyKey = inv.idemKey
	e.AuditBody = auditBody(e.action, inv)
}
