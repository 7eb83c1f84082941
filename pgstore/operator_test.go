package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/pgstore"
)

// unknownPut dispatches a put whose reply is lost: OUTCOME_UNKNOWN, no
// receipt.
func unknownPut(t *testing.T, w *guardtest.World, callID, key string) {
	t.Helper()
	w.Down.FailNext(guard.CodeOutcomeUnknown, false)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: callID, Key: key}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
}

// lastRecord returns the tenant's last audit record and its body, after
// verifying the chain.
func lastRecord(t *testing.T, s *pgstore.Store) (guard.AuditRecord, guard.AuditBody) {
	t.Helper()
	ctx := context.Background()
	n, err := guard.VerifyAudit(ctx, s, alice.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.Audit(ctx, alice.TenantID, n-1, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("last record: %v %v", recs, err)
	}
	var body guard.AuditBody
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	return recs[0], body
}

// TestUnsettledAndResolve: an operator lists the unknown and stuck writes
// and settles them by hand, audited; refusals change nothing.
func TestUnsettledAndResolve(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, pgstore.Options{})
	w := guardtest.NewWorld(t, s)
	unknownPut(t, w, "c1", "idem-1")
	unknownPut(t, w, "c2", "idem-2")
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"c","value":"3"}`, CallID: "c3", Key: "idem-3"}), guard.CodeOK, guard.DeliveryFresh)
	// A held write: reserved, its holder "dies" (the lease runs out on
	// the guard's clock).
	e := &guard.Entry{TenantID: alice.TenantID, SubjectID: alice.SubjectID, CallID: "c4", OperationID: "c4", IdempotencyKey: "k:idem-4",
		Tool: "put", Fingerprint: "fp4", Effect: guard.Write, Now: w.Now(), Token: "t4", AuditBody: []byte(`{"contract":"tool-audit-v2","action":"dispatch"}`)}
	if res, err := s.Reserve(ctx, e, guardtest.Lease); res != nil || err != nil {
		t.Fatal(res, err)
	}
	got, err := s.Unsettled(ctx, alice.TenantID, w.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].IdempotencyKey != "k:idem-1" || got[0].State != "unknown" || got[0].OperationID != "c1" ||
		got[0].CallID != "c1" || got[0].Tool != "put" || got[0].SubjectID != "alice" || got[0].Fingerprint == "" {
		t.Fatalf("within the lease: %+v", got)
	}
	w.Advance(guardtest.Lease + time.Second)
	if got, _ = s.Unsettled(ctx, alice.TenantID, w.Now()); len(got) != 3 || got[2].State != "stuck" || got[2].IdempotencyKey != "k:idem-4" ||
		!got[2].LeaseExpiry.Equal(e.Now.Add(guardtest.Lease)) {
		t.Fatalf("after the lease: %+v", got)
	}

	// Committed: the data is the result a retry replays.
	res, err := s.Resolve(ctx, guard.Resolution{TenantID: alice.TenantID, SubjectID: "alice", IdempotencyKey: "k:idem-1",
		Outcome: guard.OutcomeCommitted, Data: []byte(`{ "value": "1", "key": "a" }`), Operator: "ops@example", Now: w.Now()})
	if err != nil || res.Code != guard.CodeOK || string(res.Data) != `{"key":"a","value":"1"}` {
		t.Fatalf("resolve committed: %v %v", res, err)
	}
	rec, body := lastRecord(t, s)
	if body.Action != "resolve" || body.Operator != "ops@example" || body.Resolution != "committed" || body.Tool != "put" ||
		body.Context.OperationID != "c1" || body.Context.IdempotencyKey == nil || *body.Context.IdempotencyKey != "idem-1" ||
		rec.Code != guard.CodeOK || rec.SideEffect != guard.SideEffectYes {
		t.Fatalf("the resolution's record: %+v %s", rec, rec.Body)
	}
	r := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1-retry", Key: "idem-1"})
	guardtest.Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
	if string(r.Data) != `{"key":"a","value":"1"}` {
		t.Fatalf("replay %s", r.Data)
	}
	// Not started, by operation id: the key is free, a retry runs.
	writes := w.Down.Writes()
	res, err = s.Resolve(ctx, guard.Resolution{TenantID: alice.TenantID, SubjectID: "alice", OperationID: "c2",
		Outcome: guard.OutcomeNotStarted, Operator: "ops@example", Now: w.Now()})
	if err != nil || res.Code != guard.CodeNotFound {
		t.Fatalf("resolve not started: %v %v", res, err)
	}
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2-retry", Key: "idem-2"}), guard.CodeOK, guard.DeliveryFresh)
	if w.Down.Writes() != writes+1 {
		t.Fatalf("the retry did not run")
	}
	// Refusals: nothing changes.
	for _, c := range []struct {
		r    guard.Resolution
		want error
	}{
		{guard.Resolution{IdempotencyKey: "k:idem-3", Outcome: guard.OutcomeNotStarted}, guard.ErrAlreadyCommitted},
		{guard.Resolution{OperationID: "c3", Outcome: guard.OutcomeNotStarted}, guard.ErrAlreadyCommitted},
		{guard.Resolution{IdempotencyKey: "k:nothing", Outcome: guard.OutcomeNotStarted}, guard.ErrNoRecord},
		{guard.Resolution{OperationID: "nothing", Outcome: guard.OutcomeNotStarted}, guard.ErrNoRecord},
		{guard.Resolution{IdempotencyKey: "k:idem-4", Outcome: guard.OutcomeNotStarted, Now: e.Now}, guard.ErrLeaseActive},
	} {
		c.r.TenantID, c.r.SubjectID, c.r.Operator = alice.TenantID, "alice", "ops@example"
		if c.r.Now.IsZero() {
			c.r.Now = w.Now()
		}
		before, _ := guard.VerifyAudit(ctx, s, alice.TenantID)
		if _, err := s.Resolve(ctx, c.r); !errors.Is(err, c.want) {
			t.Fatalf("%+v: %v, want %v", c.r, err, c.want)
		}
		if after, _ := guard.VerifyAudit(ctx, s, alice.TenantID); after != before {
			t.Fatalf("a refused resolution audited something")
		}
	}
	// Forced, within the lease: resolved.
	if _, err := s.Resolve(ctx, guard.Resolution{TenantID: alice.TenantID, SubjectID: "alice", IdempotencyKey: "k:idem-4",
		Outcome: guard.OutcomeNotStarted, Operator: "ops@example", Force: true, Now: e.Now}); err != nil {
		t.Fatal(err)
	}
	if _, body := lastRecord(t, s); !body.Forced {
		t.Fatal("a forced resolution is not audited as forced")
	}
	if got, _ = s.Unsettled(ctx, alice.TenantID, w.Now()); len(got) != 0 {
		t.Fatalf("left unsettled: %+v", got)
	}
}

// TestSweep: what the retention let go is deleted, and nothing else; the
// audit log is kept.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, pgstore.Options{TTL: time.Hour, SweepEvery: -1})
	w := guardtest.NewWorld(t, s)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "r1"}), guard.CodeOK, guard.DeliveryFresh)
	if n, err := s.Sweep(ctx, w.Now().Add(59*time.Minute)); err != nil || n != 0 {
		t.Fatalf("within the TTL the sweep deleted %d rows, %v", n, err)
	}
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	n, err := s.Sweep(ctx, w.Now().Add(2*time.Hour))
	if err != nil || n < 4 {
		t.Fatalf("past the TTL the sweep deleted %d rows, %v; want the two bindings, the record and the grant", n, err)
	}
	if got, err := guard.VerifyAudit(ctx, s, alice.TenantID); err != nil || got != 3 {
		t.Fatalf("the audit log after a sweep: %d records, %v; want 3", got, err)
	}
	// Forgotten: the same call runs again, as after idem's TTL.
	w.Advance(2 * time.Hour)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
}
