package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// ledger is the downstream system of the step tests: it books entries by
// the downstream idempotency key (a second request under a key books
// nothing: the contract's promise for "absent" to be safe), keeps a
// receipt per key, and can hold a request before or after its booking,
// as a process that dies there leaves it.
type ledger struct {
	mu       sync.Mutex
	booked   map[string]string
	requests int
	effects  int
	// hold, when set, stops the next request at "before" (nothing booked)
	// or "after" (booked) until release is closed.
	hold    string
	held    chan struct{}
	release chan struct{}
	// noReceipt makes the receipt lookup fail (inconclusive).
	noReceipt bool
	// notStarted makes the next request fail before it is sent.
	notStarted bool
}

type entryIn struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

type entryOut struct {
	Entry  string `json:"entry"`
	Amount int    `json:"amount"`
}

func newLedger() *ledger { return &ledger{booked: map[string]string{}} }

// holdNext makes the next request stop at point; held is closed when it
// got there, and release lets it go on.
func (l *ledger) holdNext(point string) (held <-chan struct{}, release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold, l.held, l.release = point, make(chan struct{}), make(chan struct{})
	var once sync.Once
	ch := l.release
	return l.held, func() { once.Do(func() { close(ch) }) }
}

func (l *ledger) wait(point string) {
	l.mu.Lock()
	if l.hold != point {
		l.mu.Unlock()
		return
	}
	l.hold = ""
	held, release := l.held, l.release
	l.mu.Unlock()
	close(held)
	<-release
}

func (l *ledger) book(_ context.Context, inv *guard.Invocation, in entryIn) (entryOut, error) {
	l.mu.Lock()
	if l.notStarted {
		l.notStarted = false
		l.mu.Unlock()
		return entryOut{}, guard.NotStarted(errors.New("ledger: not sent"))
	}
	l.requests++
	l.mu.Unlock()
	l.wait("before")
	l.mu.Lock()
	out := entryOut{Entry: "E-" + in.Account, Amount: in.Amount}
	if _, dup := l.booked[inv.IdempotencyKey]; !dup {
		l.effects++
		b, _ := json.Marshal(out)
		l.booked[inv.IdempotencyKey] = string(b)
	}
	l.mu.Unlock()
	l.wait("after")
	return out, nil
}

func (l *ledger) receipt(_ context.Context, inv *guard.Invocation) (entryOut, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noReceipt {
		return entryOut{}, false, errors.New("ledger: receipts unavailable")
	}
	s, ok := l.booked[inv.IdempotencyKey]
	if !ok {
		return entryOut{}, false, nil
	}
	var out entryOut
	_ = json.Unmarshal([]byte(s), &out)
	return out, true, nil
}

func (l *ledger) counts() (requests, effects int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.effects
}

// stepWorld is a guard over a MemStore with the ledger's write tool.
type stepWorld struct {
	g     *guard.Guard
	store *guard.MemStore
	l     *ledger
}

func newStepWorld(t *testing.T) *stepWorld {
	t.Helper()
	l := newLedger()
	book := toolset.Write("book", "Book an entry.", l.book, &toolset.Options[entryIn, entryOut]{Receipt: l.receipt})
	st := guard.NewMemStore(guard.MemStoreOptions{})
	return &stepWorld{g: guard.New(toolset.MustNew(book), st, guard.Options{Lease: time.Minute}), store: st, l: l}
}

var stepPrincipal = guard.Principal{TenantID: "acme", SubjectID: "alice"}

// call is the step's call of book: the same each time the engine runs the
// step (a run's scope, the provider's call id), with step as Call.Step.
func (w *stepWorld) call(step string) guard.Call {
	return guard.Call{Principal: stepPrincipal, Step: step,
		Proposal: guard.Proposal{Name: "book", Arguments: []byte(`{"account":"A-1","amount":40}`)},
		Context:  guard.ExecutionContext{CallID: "call_1", Scope: "run-1"}}
}

func (w *stepWorld) dispatch(t *testing.T, call guard.Call) *guard.Result {
	t.Helper()
	res, err := w.g.Dispatch(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// goDispatch runs the step's first run in a goroutine: the run that
// "dies" (it is held where the test says, and its reservation stands).
func (w *stepWorld) goDispatch(call guard.Call) <-chan *guard.Result {
	done := make(chan *guard.Result, 1)
	go func() {
		res, _ := w.g.Dispatch(context.Background(), call)
		done <- res
	}()
	return done
}

// executed counts the audit records of the tenant with a side effect, and
// checks the chain.
func (w *stepWorld) executed(t *testing.T) int {
	t.Helper()
	if _, err := guard.VerifyAudit(context.Background(), w.store, stepPrincipal.TenantID); err != nil {
		t.Fatal(err)
	}
	recs, _, err := w.store.Audit(context.Background(), stepPrincipal.TenantID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.SideEffect == guard.SideEffectYes {
			n++
		}
	}
	return n
}

func wantResult(t *testing.T, res *guard.Result, code guard.Code, delivery guard.Delivery) {
	t.Helper()
	if res == nil || res.Code != code || res.Delivery != delivery {
		t.Fatalf("got %v, want %s/%s", res, code, delivery)
	}
}

// wantEntry checks that res is OK with the booked entry's data.
func wantEntry(t *testing.T, res *guard.Result, delivery guard.Delivery) {
	t.Helper()
	wantResult(t, res, guard.CodeOK, delivery)
	if string(res.Data) != `{"entry":"E-A-1","amount":40}` {
		t.Errorf("data %s, want the booked entry", res.Data)
	}
}

// TestStepOwnsItsReservation: a durable step (Call.Step) whose process
// died between its write's reservation and its commit is run again by
// the engine. It is never answered IN_PROGRESS for its own reservation:
// the tool's receipt under the same downstream key settles it, as a
// status query settles an unknown outcome. Whatever the point of the
// death, the entry is booked once, the step's answer is the write's
// result, one audit record says it ran, and the dead run's late commit
// changes nothing.
func TestStepOwnsItsReservation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hold     string // where the first run stops: after its booking, or before
		requests int    // requests the ledger got in all
	}{
		{"died after the side effect", "after", 1},
		{"died before the side effect", "before", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStepWorld(t)
			held, release := w.l.holdNext(tc.hold)
			defer release()
			first := w.goDispatch(w.call("run-1/4"))
			<-held
			// The engine runs the step again: the same step, the same call.
			res := w.dispatch(t, w.call("run-1/4"))
			wantEntry(t, res, guard.DeliveryFresh)
			if _, effects := w.l.counts(); effects != 1 {
				t.Errorf("%d entries booked, want 1", effects)
			}
			// The dead run was only held: let it finish, as a process that
			// was paused, not killed, would. Its request is deduplicated by
			// the ledger, its commit answered as the first commit of the
			// token was.
			release()
			late := <-first
			wantResult(t, late, guard.CodeOK, guard.DeliveryFresh)
			requests, effects := w.l.counts()
			if requests != tc.requests || effects != 1 {
				t.Errorf("%d requests, %d entries booked; want %d and 1", requests, effects, tc.requests)
			}
			if n := w.executed(t); n != 1 {
				t.Errorf("%d audit records with a side effect, want 1", n)
			}
			// The step run once more (its answer was lost again): a replay.
			wantResult(t, w.dispatch(t, w.call("run-1/4")), guard.CodeOK, guard.DeliveryLocalReplay)
		})
	}
}

// TestStepWithoutReceipt: the step's earlier run may have run the write
// and nothing can say whether: the answer is OUTCOME_UNKNOWN (never run
// blind), and the record stays unknown for a status query.
func TestStepWithoutReceipt(t *testing.T) {
	w := newStepWorld(t)
	w.l.noReceipt = true
	held, release := w.l.holdNext("after")
	defer release()
	w.goDispatch(w.call("run-1/4"))
	<-held
	res := w.dispatch(t, w.call("run-1/4"))
	wantResult(t, res, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if res.OperationID == "" {
		t.Error("OUTCOME_UNKNOWN without the operation id to query")
	}
	if requests, _ := w.l.counts(); requests != 1 {
		t.Errorf("%d requests, want 1: an unknown outcome is never run again blind", requests)
	}
}

// TestStepOthersStillWait: the reservation is the step's, not the
// intent's. Another step of the same intent (the model asked twice)
// while the first runs, and a dispatch that is no step, are answered
// IN_PROGRESS as before; nothing runs twice.
func TestStepOthersStillWait(t *testing.T) {
	w := newStepWorld(t)
	held, release := w.l.holdNext("after")
	defer release()
	first := w.goDispatch(w.call("run-1/4"))
	<-held
	other := w.call("run-1/9")
	other.Context.CallID = "call_2"
	wantResult(t, w.dispatch(t, other), guard.CodeInProgress, guard.DeliveryFresh)
	plain := w.call("")
	plain.Context.CallID = "call_3"
	wantResult(t, w.dispatch(t, plain), guard.CodeInProgress, guard.DeliveryFresh)
	release()
	wantResult(t, <-first, guard.CodeOK, guard.DeliveryFresh)
	if requests, _ := w.l.counts(); requests != 1 {
		t.Errorf("%d requests, want 1", requests)
	}
}

// TestStepAfterCommitOrRelease: the step's process died after its write
// was stored (before the engine recorded the step): the step run again
// replays it. A write that did not start (released) is answered so:
// nothing was executed, and nothing runs.
func TestStepAfterCommitOrRelease(t *testing.T) {
	w := newStepWorld(t)
	wantResult(t, w.dispatch(t, w.call("run-1/4")), guard.CodeOK, guard.DeliveryFresh)
	again := w.dispatch(t, w.call("run-1/4"))
	wantEntry(t, again, guard.DeliveryLocalReplay)
	if requests, _ := w.l.counts(); requests != 1 {
		t.Errorf("%d requests, want 1", requests)
	}

	w = newStepWorld(t)
	w.l.notStarted = true
	wantResult(t, w.dispatch(t, w.call("run-1/4")), guard.CodeTimeoutBeforeExecute, guard.DeliveryFresh)
	res := w.dispatch(t, w.call("run-1/4"))
	wantResult(t, res, guard.CodeUnavailable, guard.DeliveryFresh)
	if res.Message == "" || res.Outcome() != guard.OutcomeNotStarted {
		t.Errorf("released step's answer %v: want that nothing was executed", res)
	}
	if requests, effects := w.l.counts(); requests != 0 || effects != 0 {
		t.Errorf("%d requests, %d entries, want none", requests, effects)
	}
	if n := w.executed(t); n != 0 {
		t.Errorf("%d executed audit records, want 0", n)
	}
}
