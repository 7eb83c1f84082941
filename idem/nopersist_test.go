package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestRestartWithoutPersistence: a server with --save "" --appendonly no
// restarts and has forgotten everything. What the guard still promises:
// a retry runs the tool again, under the same downstream idempotency key,
// so a deduplicating downstream keeps one side effect; a status query that
// names the tool asks the receipt and answers OK receipt_reconciled
// instead of NOT_FOUND; the audit chain starts again at sequence 1 and
// verifies on its own (the lost records are only detectable against an
// exported anchor).
func TestRestartWithoutPersistence(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	dir := t.TempDir()
	srv := redistest.StartServer(t, dir, portNoPersist, "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portNoPersist),
		MaxRetries: 10, MinRetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	r := newRig(t, s)
	list := ops(alice, "np", 6)
	acked := map[string]string{}
	for i, res := range r.dispatchAll(t, list, 5*time.Second) {
		guardtest.Want(t, res, guard.CodeOK, guard.DeliveryFresh)
		acked[list[i].callID] = string(res.Data)
	}

	_ = srv.Process.Kill()
	_ = srv.Wait()
	redistest.StartServer(t, dir, portNoPersist, "--appendonly", "no")
	ctx := context.Background()
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys after a restart without persistence, want 0", n)
	}

	retried := list[0]
	res := r.dispatch(t, ctx, retried)
	guardtest.Want(t, res, guard.CodeOK, guard.DeliveryFresh)
	if runs, effects := r.led.count(retried); runs != 2 || effects != 1 || string(res.Data) != acked[retried.callID] {
		t.Fatalf("retry after the restart: %d runs, %d side effects, data %s; want 2 runs (the record is gone), "+
			"1 side effect and the first receipt %s (the downstream deduplicated)", runs, effects, res.Data, acked[retried.callID])
	}

	queried := list[1]
	plain, err := r.Guard.QueryStatus(ctx, guard.StatusCall{Principal: alice, OperationID: queried.callID})
	if err != nil {
		t.Fatal(err)
	}
	guardtest.Want(t, plain, guard.CodeNotFound, guard.DeliveryFresh)
	named := r.status(t, queried)
	guardtest.Want(t, named, guard.CodeOK, guard.DeliveryReceiptReconciled)
	if string(named.Data) != acked[queried.callID] {
		t.Fatalf("status naming the tool: %s, want the acknowledged %s", named.Data, acked[queried.callID])
	}
	if runs, _ := r.led.count(queried); runs != 1 {
		t.Fatalf("the status query ran the tool: %d runs", runs)
	}

	n, err := guard.VerifyAudit(ctx, s, alice.TenantID)
	if err != nil || n != 3 {
		t.Fatalf("audit after the restart: %d records, %v; want 3 (retry, two status queries), from sequence 1", n, err)
	}
	recs, _, err := s.Audit(ctx, alice.TenantID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var first guard.AuditBody
	if err := json.Unmarshal(recs[0].Body, &first); err != nil || recs[0].Seq != 1 || first.Context.CallID != retried.callID {
		t.Fatalf("first record after the restart: seq %d, call %q (%v); want 1, the retry %s", recs[0].Seq, first.Context.CallID, err, retried.callID)
	}
	t.Logf("restart without persistence: %d acknowledged writes forgotten; retry ran the tool again (2 runs, 1 side effect); "+
		"status without the tool NOT_FOUND, with it OK receipt_reconciled; audit restarted at 1 (%d records, the %d before are gone)",
		len(list), n, len(list))
}
