// Package guardtest is the conformance suite for guard.Store
// implementations, in the spirit of testing/slogtest: anyone writing a new
// store runs TestStore against it. It drives a real guard with its own small
// tools over the store and checks what the contract promises: bindings,
// replays, conflicts that never overwrite, writes at most once under
// concurrency, leases that turn a dead holder's write unknown, status
// queries, tenant and subject isolation with hostile ids, and one verified,
// hash-chained audit record per dispatch.
//
//	func TestMyStore(t *testing.T) {
//		guardtest.TestStore(t, func(t *testing.T) guard.AuditStore { return newMyStore(t) })
//	}
package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// NewStore returns a fresh, empty store for one subtest.
type NewStore func(t *testing.T) guard.AuditStore

// TestStore runs every conformance test against stores made by newStore.
// A failing test names the rule it checks. No test waits without a bound:
// a store that never answers fails within callTimeout.
func TestStore(t *testing.T, newStore NewStore) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the rule: %s", tc.rule)
				}
			})
			tc.run(t, NewWorld(t, newStore(t)))
		})
	}
}

// testNames returns the names of the kit's tests, in order: the subtests
// TestStore runs.
func testNames() []string {
	names := make([]string, len(tests))
	for i, tc := range tests {
		names[i] = tc.name
	}
	return names
}

var tests = []struct {
	name string
	rule string
	run  func(t *testing.T, w *World)
}{
	{"ReadBindsCallID", "a call id is bound to its first fingerprint; a read's terminal result is replayed by its call id", testReadBindsCallID},
	{"CallIDConflictKeepsOriginal", "the same call id with another fingerprint is CALL_ID_CONFLICT and never overwrites the binding", testCallIDConflict},
	{"FailedCheckIsReplayedByCallID", "a terminal failure (NOT_FOUND, INVALID_ARGUMENTS) is replayed by its call id", testFailedCheckReplay},
	{"WriteRunsOnceAndReplaysByKey", "a write runs once per idempotency key; retries by key or call id replay its result", testWriteOnce},
	{"IdempotencyConflictNeverOverwrites", "a key used with another fingerprint is IDEMPOTENCY_CONFLICT and keeps the original result", testIdempotencyConflict},
	{"NotStartedFreesKey", "a not-started outcome or a failed check leaves the key free", testNotStartedFreesKey},
	{"UnknownIsNeverExecutedBlind", "an unknown outcome is answered OUTCOME_UNKNOWN, never executed again", testUnknownNeverBlind},
	{"StatusQueryReconcilesFromReceipt", "a status query settles an unknown outcome from a found receipt and stores it", testStatusReconciles},
	{"StatusQueryWithoutReceiptStaysUnknown", "an inconclusive receipt lookup leaves the outcome unknown; an operation never run is NOT_FOUND", testStatusStaysUnknown},
	{"InProgressWhileHeld", "a key reserved under a live lease is IN_PROGRESS, with the lease's remaining time", testInProgress},
	{"LeaseExpiryMakesWriteUnknown", "a reservation whose lease expired is unknown, and its holder's late commit stores the truth", testLeaseExpiry},
	{"ConcurrentSameKeyRunsOnce", "concurrent callers of one key: one execution, one audit record each", testConcurrentSameKey},
	{"ScopesAreIsolated", "call ids and keys are scoped per tenant and subject", testScopesIsolated},
	{"HostileIDs", "ids with braces, colons and newlines never make two scopes meet", testHostileIDs},
	{"StatusOfOtherPrincipalIsNotFound", "a status query of another principal's operation is NOT_FOUND", testStatusOtherPrincipal},
	{"AuditChainOneRecordPerDispatch", "every dispatch and status query appends exactly one hash-chained audit record", testAuditChain},
	{"CommitRetryIsIdempotent", "a commit sent again with its token changes nothing and audits nothing more", testCommitRetry},
	{"ReserveRetryIsIdempotent", "a reservation sent again with its token is the same reservation; another token finds it IN_PROGRESS", testReserveRetry},
	{"ReserveSaysWhetherItReserved", "a Reserve that makes the reservation sets Entry.Reserved; a copy that finds its token's reservation standing leaves it false", testReserveSaysReserved},
	{"StepRunAgainSettlesItsReservation", "a durable step run again (Call.Step) is never IN_PROGRESS for its own reservation: the receipt settles it, one side effect; another step still waits", testStepRunAgain},
	{"ReleasedReservationRefusesLateCopy", "a reservation released by its token frees the key, and a late copy of it reserves nothing", testReleaseRefusesLateCopy},
	{"OperationIDNamesFirstOperation", "a status query answers for the first operation that used the id, its call's own or the host's; a later write takes an id over only from a read", testOperationIDFirst},
	{"AbsentReceiptAfterLeaseFreesKey", "after the lease, a receipt lookup that finds nothing settles the operation as not run: NOT_FOUND, key free", testAbsentReceiptFreesKey},
	{"GrantPaysForOneExecution", "a grant pays for one execution: another operation presenting it is APPROVAL_INVALID and runs nothing; the operation that spent it replays; a write that did not start gives it back (rule 22)", testGrantOnce},
	{"SameIntentInScopeIsOneOperation", "a write in a scope without a key or operation id is ScopeIDs' operation: repeated, it replays without approval; another scope or a Repeatable tool runs again", testScope},
	{"ChargeOncePerToken", "a budget charge sent again with its token takes nothing more, a read's or a write's; a token given back stays spent (rules 24, 25)", testChargeOncePerToken},
	{"ReplaysTakeNoCharge", "replays, IN_PROGRESS and conflicts take no budget: near the limit a fresh write runs, the next is BUDGET_EXHAUSTED (rule 24)", testReplaysTakeNoCharge},
	{"ChargeSettledWithReservation", "a write's charge is kept if it may have run and given back if it did not: not started, released, receipt absent after the lease (rule 25)", testChargeSettledWithReservation},
	{"TransactionalWriteIsNeverUnknown", "on a guard.TxStore a transactional write runs once per key and replays; a failure is a write that did not happen (never OUTCOME_UNKNOWN, status NOT_FOUND, a retry runs it); concurrent callers and status queries wait for its transaction and replay it. On another store it does not run: UNAVAILABLE, audited", testTx},
	{"EmptyOperationIDNamesNoOperation", "a call with neither a call id nor an operation id is indexed under no id: a status query that names none finds only the record of the key it names, of an operation that ran under no id", testEmptyOperationID},
	{"CallIDOfNamedOperationNamesNoOperation", "a write the host gave an operation id is found by that id, not by its call id (committed, replayed, or settled from its receipt); a retry of the call id still replays it", testCallIDOfNamedOperation},
	{"StatusAnswersForItsOwnOperation", "a status query never answers with another operation's result; an operation that never started is NOT_FOUND; a read is never OUTCOME_UNKNOWN; no receipt under a guessed key proves nothing", testStatusOwnOperation},
}

// World is a guard over the store with the suite's tools, a settable
// clock and the downstream system's counters.
type World struct {
	Guard  *guard.Guard
	Store  guard.AuditStore
	Signer *guard.Signer
	Down   *Downstream

	mu  sync.Mutex
	now time.Time
	seq atomic.Int64
}

// Now returns the world's clock.
func (w *World) Now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

// Advance moves the world's clock.
func (w *World) Advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// Lease is the reservation lease the suite's guard uses.
const Lease = 10 * time.Second

// NewWorld returns a world over the store: a guard with the suite's tools
// (get, put), a settable clock starting at a fixed time, and a signer.
func NewWorld(t testing.TB, s guard.AuditStore) *World {
	key := []byte("guardtest-approval-key-0123456789abcdef")
	signer, err := guard.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	w := &World{Store: s, Signer: signer, Down: NewDownstream(), now: time.Unix(1_700_000_000, 0)}
	w.Guard = guard.New(w.Down.Tools(), s, guard.Options{Clock: guard.ClockFunc(w.Now), Signer: signer, Lease: Lease})
	return w
}

// Principal returns a principal of the tenant and subject.
func Principal(tenant, subject string) guard.Principal {
	return guard.Principal{TenantID: tenant, SubjectID: subject}
}

// callTimeout bounds every call the suite makes: a store that does not
// answer within it fails the test instead of hanging it.
const callTimeout = 10 * time.Second

// Req is one call the suite makes of its tools: the tool, its JSON
// arguments, the call id and the idempotency key ("" for none).
type Req struct {
	Tool, Args, CallID, Key string
}

// Dispatch runs one call. It must be called from the test's goroutine;
// others use TryDispatch.
func (w *World) Dispatch(t testing.TB, p guard.Principal, r Req) *guard.Result {
	t.Helper()
	res, err := w.TryDispatch(p, r)
	if err != nil {
		t.Fatalf("Dispatch(%s %s): %v", r.Tool, r.Args, err)
	}
	return res
}

// TryDispatch is Dispatch for any goroutine: it returns what went wrong
// (a host error, or no answer within callTimeout) instead of failing.
func (w *World) TryDispatch(p guard.Principal, r Req) (*guard.Result, error) {
	return w.tryDispatch(p, r, "")
}

// tryDispatch is TryDispatch with the host's operation id (op; "" for the
// call id). A put gets a grant of its own.
func (w *World) tryDispatch(p guard.Principal, r Req, op string) (*guard.Result, error) {
	call := w.Call(p, r)
	call.Context.OperationID = op
	if r.Tool == "put" {
		tok, err := w.grant(p, r.Tool, r.Args)
		if err != nil {
			return nil, err
		}
		call.Approval = tok
	}
	return bounded(func(ctx context.Context) (*guard.Result, error) { return w.Guard.Dispatch(ctx, call) })
}

// Call returns the suite's call of a tool, with no operation id, scope or
// approval. Set those and run it with DispatchCall.
func (w *World) Call(p guard.Principal, r Req) guard.Call {
	return guard.Call{
		Principal: p,
		Proposal:  guard.Proposal{Name: r.Tool, Arguments: []byte(r.Args)},
		Context: guard.ExecutionContext{Provider: "guardtest", APIFamily: "test", ResponseID: "resp",
			CallID: r.CallID, IdempotencyKey: r.Key, AdapterRevision: "guardtest-v1"},
	}
}

// DispatchCall runs a call as it is (Dispatch makes the call and a grant
// for a put itself).
func (w *World) DispatchCall(t testing.TB, call guard.Call) *guard.Result {
	t.Helper()
	res, err := bounded(func(ctx context.Context) (*guard.Result, error) { return w.Guard.Dispatch(ctx, call) })
	if err != nil {
		t.Fatalf("Dispatch(%s %s): %v", call.Proposal.Name, call.Proposal.Arguments, err)
	}
	return res
}

// Grant returns a signed approval grant for exactly this principal, tool
// and arguments, valid for an hour of the world's clock.
func (w *World) Grant(t testing.TB, p guard.Principal, tool, args string) string {
	t.Helper()
	tok, err := w.grant(p, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (w *World) grant(p guard.Principal, tool, args string) (string, error) {
	g := guard.NewGrant(p, guard.Proposal{Name: tool, Arguments: []byte(args)}, "tester", w.Now(), time.Hour)
	return w.Signer.Sign(g)
}

// bounded runs f with a callTimeout context and gives up waiting for it
// after callTimeout and a grace, in case the store ignores the context.
func bounded(f func(ctx context.Context) (*guard.Result, error)) (*guard.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	type answer struct {
		res *guard.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := f(ctx)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, fmt.Errorf("host error: %w", a.err)
		}
		return a.res, nil
	case <-time.After(callTimeout + time.Second):
		return nil, fmt.Errorf("no answer within %v: the store ignores its context or never returns", callTimeout)
	}
}

// Status runs a status query.
func (w *World) Status(t testing.TB, p guard.Principal, op string) *guard.Result {
	t.Helper()
	return w.StatusOf(t, p, op, Req{})
}

// StatusOf runs a status query of operation op that names the request it
// ran as: its tool and the idempotency key it ran under (r.Tool and r.Key;
// "" for none), as a host that kept them does.
func (w *World) StatusOf(t testing.TB, p guard.Principal, op string, r Req) *guard.Result {
	t.Helper()
	sc := guard.StatusCall{Principal: p, OperationID: op, Tool: r.Tool,
		Context: guard.ExecutionContext{Provider: "guardtest", CallID: fmt.Sprintf("status-%d", w.seq.Add(1)), IdempotencyKey: r.Key}}
	res, err := bounded(func(ctx context.Context) (*guard.Result, error) { return w.Guard.QueryStatus(ctx, sc) })
	if err != nil {
		t.Fatalf("QueryStatus(%s): %v", op, err)
	}
	return res
}

// AuditedCodes counts the records of the tenant's audit log by code.
func AuditedCodes(t testing.TB, s guard.AuditStore, tenant string) map[guard.Code]int {
	t.Helper()
	recs, _, err := s.Audit(context.Background(), tenant, 0, 1<<20)
	if err != nil {
		t.Fatalf("audit of tenant %s: %v", tenant, err)
	}
	out := map[guard.Code]int{}
	for _, r := range recs {
		out[r.Code]++
	}
	return out
}

// Want checks a result's code and delivery.
func Want(t testing.TB, res *guard.Result, code guard.Code, delivery guard.Delivery) {
	t.Helper()
	if res.Code != code || res.Delivery != delivery {
		t.Fatalf("got %s/%s (%s), want %s/%s", res.Code, res.Delivery, res, code, delivery)
	}
}

// Downstream is the system the suite's tools change: a key-value service
// that counts its writes, keeps a receipt per idempotency key and fails on
// demand.
type Downstream struct {
	mu       sync.Mutex
	values   map[string]string
	receipts map[string]string
	writes   int
	fail     guard.Code // the next put fails with this code (TimeoutBeforeExecute, OutcomeUnknown)
	noRecpt  bool
	block    chan struct{} // when set, put waits on it after writing
	entered  chan struct{}
}

// NewDownstream returns an empty downstream system.
func NewDownstream() *Downstream {
	return &Downstream{values: map[string]string{}, receipts: map[string]string{}}
}

// Writes returns how many side effects happened.
func (d *Downstream) Writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes
}

// FailNext makes the next put fail: TimeoutBeforeExecute before writing,
// OutcomeUnknown after writing (the reply is lost).
func (d *Downstream) FailNext(code guard.Code, receiptAvailable bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail, d.noRecpt = code, !receiptAvailable
}

// Block makes later puts wait, after writing, until the returned function
// is called; entered receives once per put that reached the wait. Defer
// release, so that a failing test never leaves a put waiting.
func (d *Downstream) Block() (entered <-chan struct{}, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.block = make(chan struct{})
	d.entered = make(chan struct{}, 64)
	var once sync.Once
	ch := d.block
	return d.entered, func() { once.Do(func() { close(ch) }) }
}

// receipt is the put tool's receipt lookup.
func (d *Downstream) receipt(_ context.Context, inv *guard.Invocation) (map[string]any, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.noRecpt {
		return nil, false, fmt.Errorf("downstream: receipts unavailable")
	}
	s, ok := d.receipts[inv.IdempotencyKey]
	if !ok {
		return nil, false, nil
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(s), &out)
	return out, true, nil
}

// PutIn is the input of the put tool.
type PutIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// GetIn is the input of the get tool.
type GetIn struct {
	Key string `json:"key"`
}

// Tools returns the suite's tools: get (read; keys starting "secret" are
// NOT_FOUND), put (write, needs approval, receipt by idempotency key, an
// execution costs 1 against a tenant budget, if the guard has one),
// append (write, no approval, Repeatable: each call appends again) and
// put_tx (put as a transactional write, guard.ToolSpec.Transactional:
// no approval, no receipt; see tx.go).
func (d *Downstream) Tools() *toolset.Set {
	get := toolset.Read("get", "Read a value.", func(_ context.Context, _ *guard.Invocation, in GetIn) (map[string]string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return map[string]string{"key": in.Key, "value": d.values[in.Key]}, nil
	}, &toolset.Options[GetIn, map[string]string]{
		Authorize: func(_ context.Context, _ *guard.Invocation, in GetIn) error {
			if len(in.Key) >= 6 && in.Key[:6] == "secret" {
				return guard.ErrNotFound
			}
			return nil
		},
	})
	put := toolset.Write("put", "Write a value.", func(ctx context.Context, inv *guard.Invocation, in PutIn) (map[string]any, error) {
		d.mu.Lock()
		if d.fail == guard.CodeTimeoutBeforeExecute {
			d.fail = 0
			d.mu.Unlock()
			return nil, guard.NotStarted(fmt.Errorf("downstream: not sent"))
		}
		d.writes++
		n := d.writes
		d.values[in.Key] = in.Value
		out := map[string]any{"key": in.Key, "value": in.Value, "write": n}
		b, _ := json.Marshal(out)
		if !d.noRecpt {
			d.receipts[inv.IdempotencyKey] = string(b)
		}
		fail := d.fail
		d.fail = 0
		block, entered := d.block, d.entered
		d.mu.Unlock()
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		if fail == guard.CodeOutcomeUnknown {
			return nil, guard.UnknownOutcome(fmt.Errorf("downstream: reply lost"))
		}
		return out, nil
	}, &toolset.Options[PutIn, map[string]any]{NeedsApproval: true, Receipt: d.receipt,
		Budget: &toolset.Budget[PutIn]{Cost: 1}}) // bounded only by a tenant budget: the budget tests'
	appendTool := toolset.Write("append", "Append to a value; each call appends again.", func(_ context.Context, _ *guard.Invocation, in PutIn) (map[string]any, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.writes++
		d.values[in.Key] += in.Value
		return map[string]any{"key": in.Key, "value": d.values[in.Key], "write": d.writes}, nil
	}, &toolset.Options[PutIn, map[string]any]{Repeatable: true})
	return toolset.MustNew(get, put, appendTool, d.txTool())
}
