package idem_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/toolset"
)

// ledger is the downstream system of the fault tests: a service that
// deduplicates by the idempotency key the guard hands it, like a payment
// API. It counts, per write (the "key" argument, unique per op in these
// tests), how often the tool ran (runs) and how many side effects it
// caused (effects: at most one per downstream key, as any deduplicating
// service promises). A guard that runs an acknowledged write again shows
// as runs > 1; its side effect stays 1 because of the downstream key.
type ledger struct {
	mu       sync.Mutex
	runs     map[string]int
	effectOf map[string]int
	receipts map[string]json.RawMessage
	ranAt    map[string]time.Time // when the write's tool last returned
	effects  int
	gate     chan struct{} // when set, a run waits on it after its side effect
	entered  chan struct{}
}

func newLedger() *ledger {
	return &ledger{runs: map[string]int{}, effectOf: map[string]int{}, receipts: map[string]json.RawMessage{},
		ranAt: map[string]time.Time{}}
}

// block makes later runs wait after their side effect until release;
// entered receives once per run that reached the wait.
func (l *ledger) block(n int) (entered <-chan struct{}, release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate, l.entered = make(chan struct{}), make(chan struct{}, n)
	gate := l.gate
	var once sync.Once
	return l.entered, func() {
		once.Do(func() {
			l.mu.Lock()
			l.gate = nil
			l.mu.Unlock()
			close(gate)
		})
	}
}

func (l *ledger) tools() *toolset.Set {
	put := toolset.Write("put", "Write a value.", func(_ context.Context, inv *guard.Invocation, in putIn) (json.RawMessage, error) {
		l.mu.Lock()
		l.runs[in.Key]++
		r, ok := l.receipts[inv.IdempotencyKey]
		if !ok {
			l.effects++
			l.effectOf[in.Key]++
			r, _ = json.Marshal(map[string]any{"key": in.Key, "value": in.Value, "effect": l.effects})
			l.receipts[inv.IdempotencyKey] = r
		}
		gate, entered := l.gate, l.entered
		l.mu.Unlock()
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
		// The guard sends the write's commit after this: a commit sent
		// after a moment the test saw is one the server ran after it.
		l.mu.Lock()
		l.ranAt[in.Key] = time.Now()
		l.mu.Unlock()
		return r, nil
	}, &toolset.Options[putIn, json.RawMessage]{
		Budget: &toolset.Budget[putIn]{Cost: 1}, // against the rig's tenant budget, if it has one
		Receipt: func(_ context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			r, ok := l.receipts[inv.IdempotencyKey]
			return r, ok, nil
		},
	})
	return toolset.MustNew(put)
}

// count returns how often the op's write ran and how many side effects
// it caused.
func (l *ledger) count(o op) (runs, effects int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[o.key], l.effectOf[o.key]
}

// ran returns when the op's write last returned from its tool (zero if
// it never ran).
func (l *ledger) ran(o op) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ranAt[o.key]
}

// tally counts the ops by how often they ran: never, once, again (more
// than once); and checks that none caused more than one side effect.
func (l *ledger) tally(t testing.TB, list []op) (never, once, again int) {
	t.Helper()
	for _, o := range list {
		runs, effects := l.count(o)
		if effects > 1 {
			t.Errorf("%s: %d side effects under one downstream key", o.callID, effects)
		}
		switch {
		case runs == 0:
			never++
		case runs == 1:
			once++
		default:
			again++
		}
	}
	return never, once, again
}

// rig is a guardtest.World (its settable clock) whose guard runs the
// ledger's put tool.
type rig struct {
	*guardtest.World
	led    *ledger
	budget guard.TenantBudget // each put costs 1 against it (none by default)
}

func newRig(t testing.TB, s guard.AuditStore) *rig {
	w := guardtest.NewWorld(t, s)
	r := &rig{World: w, led: newLedger()}
	r.use(s)
	return r
}

// use points the rig's guard at another store (a promoted replica, a
// restarted server) with the same clock and ledger.
func (r *rig) use(s guard.AuditStore) {
	r.Store = s
	r.Guard = guard.New(r.led.tools(), s, guard.Options{Clock: guard.ClockFunc(r.Now), Lease: guardtest.Lease, TenantBudget: r.budget})
}

// op is one write: its principal, call id and idempotency key.
type op struct {
	p           guard.Principal
	callID, key string
}

func (o op) call() guard.Call {
	return guard.Call{Principal: o.p,
		Proposal: guard.Proposal{Name: "put", Arguments: []byte(`{"key":"` + o.key + `","value":"v"}`)},
		Context:  guard.ExecutionContext{Provider: "faults", CallID: o.callID, IdempotencyKey: o.key}}
}

// ops returns n writes of the principal with distinct call ids and keys.
func ops(p guard.Principal, tag string, n int) []op {
	out := make([]op, n)
	for i := range out {
		out[i] = op{p: p, callID: tag + "-call-" + strconv.Itoa(i), key: tag + "-key-" + strconv.Itoa(i)}
	}
	return out
}

// dispatch runs the op with a deadline; a host error fails the test.
func (r *rig) dispatch(t testing.TB, ctx context.Context, o op) *guard.Result {
	t.Helper()
	res, err := r.Guard.Dispatch(ctx, o.call())
	if err != nil {
		t.Errorf("dispatch %s: host error %v", o.callID, err)
		return &guard.Result{Code: guard.CodeUnavailable}
	}
	return res
}

// dispatchAll runs the ops at once, each with the deadline, and returns
// their results in order.
func (r *rig) dispatchAll(t testing.TB, list []op, deadline time.Duration) []*guard.Result {
	out := make([]*guard.Result, len(list))
	var wg sync.WaitGroup
	for i, o := range list {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			out[i] = r.dispatch(t, ctx, o)
		})
	}
	wg.Wait()
	return out
}

// status asks for the op's outcome naming its tool and key, as a host that
// kept them does.
func (r *rig) status(t testing.TB, o op) *guard.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.Guard.QueryStatus(ctx, guard.StatusCall{Principal: o.p, OperationID: o.callID, Tool: "put",
		Context: guard.ExecutionContext{Provider: "faults", CallID: "status-" + o.callID, IdempotencyKey: o.key}})
	if err != nil {
		t.Fatalf("status %s: host error %v", o.callID, err)
	}
	return res
}

// recover follows the recovery the contract prescribes until the op has a
// result: UNAVAILABLE is retried, IN_PROGRESS waits out the lease (the
// world's clock is advanced past it), OUTCOME_UNKNOWN asks a status query
// (a receipt settles it; no receipt after the lease means NOT_FOUND, and
// the write may run again). It returns the final result and the codes met
// on the way, e.g. "IN_PROGRESS>OUTCOME_UNKNOWN>NOT_FOUND>OK".
func (r *rig) recover(t testing.TB, o op) (*guard.Result, string) {
	t.Helper()
	path := ""
	for step := 0; step < 12; step++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res := r.dispatch(t, ctx, o)
		cancel()
		if path != "" {
			path += ">"
		}
		path += res.Code.String()
		switch res.Code {
		case guard.CodeOK, guard.CodeIdempotencyConflict, guard.CodeCallIDConflict:
			return res, path
		case guard.CodeInProgress:
			r.Advance(guardtest.Lease + time.Second)
		case guard.CodeOutcomeUnknown:
			s := r.status(t, o)
			path += ">status:" + s.Code.String()
			if s.Code == guard.CodeOK {
				return s, path
			}
			if s.Code != guard.CodeNotFound {
				t.Fatalf("%s: status query %s after the lease, want OK from the receipt or NOT_FOUND", o.callID, s)
			}
		case guard.CodeUnavailable:
			time.Sleep(50 * time.Millisecond) // the server is still busy: retry after a pause, as RetryAfter says
		default:
			t.Fatalf("%s: unexpected %s (path %s)", o.callID, res, path)
		}
	}
	t.Fatalf("%s: no result after 12 steps: %s", o.callID, path)
	return nil, path
}

// verifyAll checks every tenant's audit chain.
func verifyAll(t testing.TB, s guard.AuditStore, tenants ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tn := range tenants {
		if _, err := guard.VerifyAudit(ctx, s, tn); err != nil {
			t.Errorf("tenant %s: audit chain: %v", tn, err)
		}
	}
}
