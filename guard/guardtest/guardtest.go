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
//		guardtest.TestStore(t, func(t *testing.T) guard.Store { return newMyStore(t) })
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
type NewStore func(t *testing.T) guard.Store

// TestStore runs every conformance test against stores made by newStore.
func TestStore(t *testing.T, newStore NewStore) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, NewWorld(t, newStore(t)))
		})
	}
}

var tests = []struct {
	name string
	run  func(t *testing.T, w *World)
}{
	{"ReadBindsCallID", testReadBindsCallID},
	{"CallIDConflictKeepsOriginal", testCallIDConflict},
	{"FailedCheckIsReplayedByCallID", testFailedCheckReplay},
	{"WriteRunsOnceAndReplaysByKey", testWriteOnce},
	{"IdempotencyConflictNeverOverwrites", testIdempotencyConflict},
	{"NotStartedFreesKey", testNotStartedFreesKey},
	{"UnknownIsNeverExecutedBlind", testUnknownNeverBlind},
	{"StatusQueryReconcilesFromReceipt", testStatusReconciles},
	{"StatusQueryWithoutReceiptStaysUnknown", testStatusStaysUnknown},
	{"InProgressWhileHeld", testInProgress},
	{"LeaseExpiryMakesWriteUnknown", testLeaseExpiry},
	{"ConcurrentSameKeyRunsOnce", testConcurrentSameKey},
	{"ScopesAreIsolated", testScopesIsolated},
	{"HostileIDs", testHostileIDs},
	{"StatusOfOtherPrincipalIsNotFound", testStatusOtherPrincipal},
	{"AuditChainOneRecordPerDispatch", testAuditChain},
	{"CommitRetryIsIdempotent", testCommitRetry},
}

// World is a guard over the store with the suite's tools, a settable
// clock and the downstream system's counters.
type World struct {
	Guard  *guard.Guard
	Store  guard.Store
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
func NewWorld(t testing.TB, s guard.Store) *World {
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

// Dispatch runs one call: tool, JSON arguments, call id, idempotency key.
func (w *World) Dispatch(t testing.TB, p guard.Principal, tool, args, callID, key string) *guard.Result {
	t.Helper()
	call := guard.Call{
		Principal: p,
		Proposal:  guard.Proposal{Name: tool, Arguments: []byte(args)},
		Context: guard.ExecutionContext{Provider: "guardtest", APIFamily: "test", ResponseID: "resp",
			CallID: callID, IdempotencyKey: key, AdapterRevision: "guardtest-v1"},
	}
	if tool == "put" {
		g := guard.NewGrant(p, call.Proposal, "tester", w.Now(), time.Hour)
		tok, err := w.Signer.Sign(g)
		if err != nil {
			t.Fatal(err)
		}
		call.Approval = tok
	}
	res, err := w.Guard.Dispatch(context.Background(), call)
	if err != nil {
		t.Fatalf("Dispatch(%s %s): host error %v", tool, args, err)
	}
	return res
}

// Status runs a status query.
func (w *World) Status(t testing.TB, p guard.Principal, op string) *guard.Result {
	t.Helper()
	res, err := w.Guard.QueryStatus(context.Background(), guard.StatusCall{Principal: p, OperationID: op,
		Context: guard.ExecutionContext{Provider: "guardtest", CallID: fmt.Sprintf("status-%d", w.seq.Add(1))}})
	if err != nil {
		t.Fatalf("QueryStatus(%s): host error %v", op, err)
	}
	return res
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
// is called; entered receives once per put that reached the wait.
func (d *Downstream) Block() (entered <-chan struct{}, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.block = make(chan struct{})
	d.entered = make(chan struct{}, 64)
	var once sync.Once
	ch := d.block
	return d.entered, func() { once.Do(func() { close(ch) }) }
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
// NOT_FOUND) and put (write, needs approval, receipt by idempotency key).
func (d *Downstream) Tools() *toolset.Set {
	get := toolset.Read("get", "Read a value.", func(_ context.Context, _ *guard.Invocation, in GetIn) (map[string]string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return map[string]string{"key": in.Key, "value": d.values[in.Key]}, nil
	}).Authorize(func(_ context.Context, _ *guard.Invocation, in GetIn) error {
		if len(in.Key) >= 6 && in.Key[:6] == "secret" {
			return guard.ErrNotFound
		}
		return nil
	})
	put := toolset.Write("put", "Write a value.", func(ctx context.Context, inv *guard.Invocation, in PutIn) (map[string]any, error) {
		d.mu.Lock()
		if d.fail == guard.TimeoutBeforeExecute {
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
		if fail == guard.OutcomeUnknown {
			return nil, guard.Unknown(fmt.Errorf("downstream: reply lost"))
		}
		return out, nil
	}).RequireApproval().Receipt(func(_ context.Context, inv *guard.Invocation) (map[string]any, bool, error) {
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
	})
	return toolset.MustNew(get, put)
}
