package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// The transactional-write tests (guard.TxStore, guard.ToolSpec.Transactional).
// The suite's put_tx counts its writes in the Downstream, not in the
// store's transaction (the suite cannot know a store's database), so what
// these tests check is the TxStore contract as the guard sees it: a write
// that ran commits with its outcome or fails whole, and is never unknown.

// txTool is the suite's transactional write: put's function, declared
// guard.ToolSpec.Transactional. A failure set with FailNext happens before
// its write, as a store's rollback would leave it.
type txTool struct {
	*toolset.Tool[PutIn, map[string]any]
	spec guard.ToolSpec
}

// Spec implements guard.Tool.
func (t *txTool) Spec() *guard.ToolSpec { return &t.spec }

func (d *Downstream) txTool() *txTool {
	t := toolset.Write("put_tx", "Write a value, transactionally.", func(ctx context.Context, _ *guard.Invocation, in PutIn) (map[string]any, error) {
		d.mu.Lock()
		fail := d.fail
		d.fail = 0
		switch fail {
		case guard.CodeOutcomeUnknown:
			d.mu.Unlock()
			return nil, guard.UnknownOutcome(fmt.Errorf("downstream: the tool claims an unknown outcome"))
		case guard.CodeTimeoutBeforeExecute:
			d.mu.Unlock()
			return nil, fmt.Errorf("downstream: a plain error")
		}
		d.writes++
		d.values[in.Key] = in.Value
		out := map[string]any{"key": in.Key, "value": in.Value, "write": d.writes}
		block, entered := d.block, d.entered
		d.mu.Unlock()
		if block != nil {
			entered <- struct{}{}
			<-block
		}
		return out, nil
	}, nil)
	tt := &txTool{Tool: t, spec: *t.Spec()}
	tt.spec.Transactional = true
	return tt
}

// testTx tests a transactional write on the store: exactly once on a
// guard.TxStore (testTxRunsOnce), not at all on another store.
func testTx(t *testing.T, w *World) {
	if _, ok := w.Store.(guard.TxStore); ok {
		testTxRunsOnce(t, w)
		return
	}
	args := `{"key":"a","value":"1"}`
	Want(t, w.Dispatch(t, alice, Req{Tool: "put_tx", Args: args, CallID: "c1", Key: "idem-1"}), guard.CodeUnavailable, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 0 {
		t.Fatalf("%d writes on a store that cannot hold them, want 0", n)
	}
	Want(t, w.StatusOf(t, alice, "c1", Req{Tool: "put_tx", Key: "idem-1"}), guard.CodeNotFound, guard.DeliveryFresh)
	// The store still runs other writes.
	Want(t, w.Dispatch(t, alice, Req{Tool: "append", Args: args, CallID: "c2"}), guard.CodeOK, guard.DeliveryFresh)
	codes := AuditedCodes(t, w.Store, alice.TenantID)
	if codes[guard.CodeUnavailable] != 1 || codes[guard.CodeOK] != 1 {
		t.Fatalf("audited %v, want one UNAVAILABLE and one OK", codes)
	}
}

// testTxRunsOnce: on a guard.TxStore, a transactional write is exactly
// once: committed with its outcome, or not at all.
func testTxRunsOnce(t *testing.T, w *World) {
	ctx := context.Background()
	args := `{"key":"a","value":"1"}`
	first := w.Dispatch(t, alice, Req{Tool: "put_tx", Args: args, CallID: "c1", Key: "idem-1"})
	Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	for _, c := range []struct{ call, key string }{{"c1", "idem-1"}, {"c2", "idem-1"}, {"c1", ""}} {
		r := w.Dispatch(t, alice, Req{Tool: "put_tx", Args: args, CallID: c.call, Key: c.key})
		Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(r.Data) != string(first.Data) {
			t.Fatalf("replay %v: %s, want %s", c, r.Data, first.Data)
		}
	}
	Want(t, w.StatusOf(t, alice, "c1", Req{Tool: "put_tx", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put_tx", Args: `{"key":"a","value":"2"}`, CallID: "c3", Key: "idem-1"}), guard.CodeIdempotencyConflict, guard.DeliveryFresh)

	// A tool that fails, even claiming an unknown outcome, wrote nothing
	// that stays: the write did not happen, and a retry runs it.
	for i, fail := range []guard.Code{guard.CodeOutcomeUnknown, guard.CodeTimeoutBeforeExecute} {
		call, key := fmt.Sprintf("f%d", i), fmt.Sprintf("idem-f%d", i)
		w.Down.FailNext(fail, true)
		r := w.Dispatch(t, alice, Req{Tool: "put_tx", Args: args, CallID: call, Key: key})
		if r.Code == guard.CodeOutcomeUnknown || r.Code.Outcome() != guard.OutcomeNotStarted {
			t.Fatalf("a transactional write that failed: %s, want an outcome not_started", r)
		}
		Want(t, w.StatusOf(t, alice, call, Req{Tool: "put_tx", Key: key}), guard.CodeNotFound, guard.DeliveryFresh)
		Want(t, w.Dispatch(t, alice, Req{Tool: "put_tx", Args: args, CallID: call, Key: key}), guard.CodeOK, guard.DeliveryFresh)
	}
	if n := w.Down.Writes(); n != 3 {
		t.Fatalf("%d writes, want 3", n)
	}

	// Concurrent callers of one key, and a status query, while the first
	// is inside its transaction: they wait for it, and replay it.
	entered, release := w.Down.Block()
	defer release()
	holder := goDispatch(w, alice, "put_tx", args, "h0", "idem-h")
	holder.entered(t, entered)
	const n = 8
	var wg sync.WaitGroup
	results := make([]*guard.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = w.TryDispatch(alice, Req{Tool: "put_tx", Args: args, CallID: fmt.Sprintf("h%d", i+1), Key: "idem-h"})
		})
	}
	status := make(chan *guard.Result, 1)
	go func() {
		sc := guard.StatusCall{Principal: alice, OperationID: "h0", Tool: "put_tx",
			Context: guard.ExecutionContext{Provider: "guardtest", CallID: "status-h0", IdempotencyKey: "idem-h"}}
		r, _ := bounded(func(ctx context.Context) (*guard.Result, error) { return w.Guard.QueryStatus(ctx, sc) })
		status <- r
	}()
	release()
	Want(t, holder.wait(t), guard.CodeOK, guard.DeliveryFresh)
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i+1, errs[i])
		}
		Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
	}
	if r := <-status; r == nil || r.Code != guard.CodeOK {
		t.Fatalf("a status query during the write: %v, want OK once it committed", r)
	}
	if n := w.Down.Writes(); n != 4 {
		t.Fatalf("%d writes, want 4", n)
	}
	got, err := guard.VerifyAudit(ctx, w.Store, alice.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := w.Store.Audit(ctx, alice.TenantID, 0, int(got))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Code == guard.CodeOutcomeUnknown || r.Code == guard.CodeInProgress {
			var body guard.AuditBody
			_ = json.Unmarshal(r.Body, &body)
			t.Fatalf("record %d of %s is %s: a transactional write is never unknown", r.Seq, body.Tool, r.Code)
		}
	}
}
