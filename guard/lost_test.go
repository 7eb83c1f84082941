package guard_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
)

// lostStore is a MemStore standing for a store that lost records of every
// tenant (idem after an acknowledged eviction): a reservation of a key
// without a record says the write may have run before.
type lostStore struct{ *guard.MemStore }

func (s lostStore) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	res, err := s.MemStore.Reserve(ctx, e, lease)
	if res == nil && err == nil {
		e.MayBeLost = true
	}
	return res, err
}

// TestMayBeLost: a write whose record the store may have lost runs only if
// its tool's receipt lookup says the operation is absent downstream. A
// receipt found, or a lookup that cannot say, makes it OUTCOME_UNKNOWN
// (MayBeLostMessage) without running it, committed as unknown, and its
// budget charge is given back (nothing ran in this dispatch); a status
// query then settles it from the receipt.
func TestMayBeLost(t *testing.T) {
	first := guardtest.NewWorld(t, guard.NewMemStore(guard.MemStoreOptions{}))
	p := guardtest.Principal("t", "u")
	args := `{"key":"a","value":"1"}`
	guardtest.Want(t, first.Dispatch(t, p, guardtest.Req{Tool: "put", Args: args, CallID: "c1", Key: "k1"}), guard.CodeOK, guard.DeliveryFresh)

	// The same downstream system, behind a store that lost c1's record,
	// with a tenant budget of one execution.
	w := guardtest.NewWorld(t, lostStore{guard.NewMemStore(guard.MemStoreOptions{})})
	w.Down = first.Down
	w.Guard = guard.New(w.Down.Tools(), w.Store, guard.Options{Clock: guard.ClockFunc(w.Now), Signer: w.Signer,
		Lease: guardtest.Lease, TenantBudget: guard.TenantBudget{Limit: 1}})

	res := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: args, CallID: "c1", Key: "k1"})
	guardtest.Want(t, res, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if res.Message != guard.MayBeLostMessage || res.OperationID != "c1" {
		t.Fatalf("a replay whose record may be lost, its receipt found: %s", res)
	}
	// Inconclusive: the downstream system cannot say.
	w.Down.FailNext(guard.CodeTimeoutBeforeExecute, false)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"2"}`, CallID: "c2", Key: "k2"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	w.Down.FailNext(0, true)
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects, want the first one only", n)
	}
	// Neither took the budget: a new write, its receipt absent, runs.
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"c","value":"3"}`, CallID: "c3", Key: "k3"}), guard.CodeOK, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"d","value":"4"}`, CallID: "c4", Key: "k4"}), guard.CodeBudgetExhausted, guard.DeliveryFresh)
	// The one that ran before is settled from its receipt; its replay
	// stays unknown until then, and never runs.
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: args, CallID: "c1", Key: "k1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	guardtest.Want(t, w.StatusOf(t, p, "c1", guardtest.Req{Tool: "put", Key: "k1"}), guard.CodeOK, guard.DeliveryReceiptReconciled)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: args, CallID: "c1", Key: "k1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d side effects, want 2", n)
	}
	if got := guardtest.AuditedCodes(t, w.Store, "t"); got[guard.CodeOutcomeUnknown] != 3 {
		t.Fatalf("audited %v, want 3 OUTCOME_UNKNOWN", got)
	}
}
