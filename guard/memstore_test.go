package guard_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/cases/casestest"
)

// TestConformance runs the store conformance suite, with the default
// retention and with a TTL (which the suite's clock never reaches).
func TestConformance(t *testing.T) {
	guardtest.TestStore(t, func(t *testing.T) guard.AuditStore { return guard.NewMemStore(guard.MemStoreOptions{}) })
}

func TestConformanceTTL(t *testing.T) {
	guardtest.TestStore(t, func(t *testing.T) guard.AuditStore { return guard.NewMemStore(guard.MemStoreOptions{TTL: time.Hour}) })
}

// TestCases runs the repository's tool-call case files (what cmd/toolcases
// runs on miniredis) on memstore.
func TestCases(t *testing.T) {
	casestest.Run(t, filepath.Join("..", "testdata"), func(t *testing.T) cases.World {
		return cases.World{Store: guard.NewMemStore(guard.MemStoreOptions{}), Close: func() {}}
	})
}

var (
	ctx = context.Background()
	t0  = time.Unix(1_700_000_000, 0)
)

const lease = 10 * time.Second

// write returns the entry of a write of fingerprint fp under key k.
func write(call, k, fp, token string, now time.Time) *guard.Entry {
	return &guard.Entry{TenantID: "t", SubjectID: "s", CallID: call, OperationID: call, IdempotencyKey: k,
		Tool: "put", Fingerprint: fp, Effect: guard.Write, Now: now, Token: token,
		SideEffect: guard.SideEffectYes, AuditBody: []byte(`{"contract":"tool-audit-v2","action":"dispatch"}`)}
}

// query returns the entry of a status query, as the guard makes it.
func query(op string, now time.Time) *guard.Entry {
	return &guard.Entry{TenantID: "t", SubjectID: "s", CallID: "q", OperationID: op, Now: now,
		SideEffect: guard.SideEffectNone, AuditBody: []byte(`{"contract":"tool-audit-v2","action":"query_status"}`)}
}

func want(t *testing.T, res *guard.Result, err error, code guard.Code, delivery guard.Delivery) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || res.Code != code || res.Delivery != delivery {
		t.Fatalf("got %v, want %s/%s", res, code, delivery)
	}
}

// mustReserve reserves the entry's key, which must be free.
func mustReserve(t *testing.T, s *guard.MemStore, e *guard.Entry) {
	t.Helper()
	if res, err := s.Reserve(ctx, e, lease); res != nil || err != nil {
		t.Fatalf("reserve %s under %s: %v %v", e.IdempotencyKey, e.Token, res, err)
	}
}

// wantRecords checks the chain of tenant t's audit log and its length.
func wantRecords(t *testing.T, s *guard.MemStore, want int64) {
	t.Helper()
	n, err := guard.VerifyAudit(ctx, s, "t")
	if err != nil || n != want {
		t.Fatalf("audit log: %d records, %v; want %d and a valid chain", n, err, want)
	}
}

// TestReserveRetrySameToken: a copy of a reservation (same token) returns
// nil again and changes nothing, even after its lease ended (rule 12).
func TestReserveRetrySameToken(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	e := write("c1", "k:1", "f1", "tok1", t0)
	for i := range 2 {
		if res, err := s.Reserve(ctx, e, lease); res != nil || err != nil {
			t.Fatalf("reserve %d: %v %v", i, res, err)
		}
	}
	// Another token of the same intent is in progress, with the full wait.
	res, err := s.Reserve(ctx, write("c2", "k:1", "f1", "tok2", t0.Add(4*time.Second)), lease)
	want(t, res, err, guard.CodeInProgress, guard.DeliveryFresh)
	if res.RetryAfter != 6*time.Second {
		t.Fatalf("retry after %v, want 6s", res.RetryAfter)
	}
	wantRecords(t, s, 1)
	// The copy is still accepted after the lease: the reservation is its own.
	e.Now = t0.Add(time.Minute)
	mustReserve(t, s, e)
	// Committed, the token's copies are refused.
	e.Code, e.Data = guard.CodeOK, []byte(`{"n":1}`)
	res, err = s.Commit(ctx, e)
	want(t, res, err, guard.CodeOK, guard.DeliveryFresh)
	res, err = s.Reserve(ctx, e, lease)
	want(t, res, err, guard.CodeUnavailable, guard.DeliveryFresh)
	wantRecords(t, s, 2)
}

// TestTombstoneRefusesLateCopy: released by a not-started commit, the key
// is free for others, but a late copy of the released reservation cannot
// take it again (rules 3, 12, 13).
func TestTombstoneRefusesLateCopy(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	e := write("c1", "k:1", "f1", "tok1", t0)
	mustReserve(t, s, e)
	e.Code = guard.CodeRateLimit
	e.RetryAfter = 2 * time.Second
	res, err := s.Commit(ctx, e)
	want(t, res, err, guard.CodeRateLimit, guard.DeliveryFresh)
	if res.RetryAfter != 2*time.Second {
		t.Fatalf("retry after %v", res.RetryAfter)
	}
	late := write("c1", "k:1", "f1", "tok1", t0)
	res, err = s.Reserve(ctx, late, lease)
	want(t, res, err, guard.CodeUnavailable, guard.DeliveryFresh)
	// The key is free: a new dispatch of the call reserves it.
	mustReserve(t, s, write("c1", "k:1", "f1", "tok2", t0.Add(time.Second)))
	wantRecords(t, s, 1)
}

// TestSettleAbsent: an absent receipt releases the key only once the
// reservation's lease is over (rule 16).
func TestSettleAbsent(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	e := write("c1", "k:1", "f1", "tok1", t0)
	mustReserve(t, s, e)
	e.Code = guard.CodeOutcomeUnknown
	res, err := s.Commit(ctx, e)
	want(t, res, err, guard.CodeOutcomeUnknown, guard.DeliveryFresh)

	settle := func(now time.Time) *guard.Result {
		t.Helper()
		q := query("c1", now)
		res, p, err := s.Status(ctx, q)
		if err != nil || res != nil || p == nil || p.Lost || p.Tool != "put" || p.IdempotencyKey != "k:1" || p.CallID != "c1" {
			t.Fatalf("status: %v %+v %v", res, p, err)
		}
		q.Tool, q.Fingerprint, q.IdempotencyKey = p.Tool, p.Fingerprint, p.IdempotencyKey
		res, err = s.Settle(ctx, q, p, guard.ReceiptAbsent, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Within the lease the request may still be in flight.
	res = settle(t0.Add(lease - time.Millisecond))
	want(t, res, nil, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if res.OperationID != "c1" {
		t.Fatalf("operation id %q", res.OperationID)
	}
	// Once it is over, absent means it did not take place.
	res = settle(t0.Add(lease))
	want(t, res, nil, guard.CodeNotFound, guard.DeliveryFresh)
	res, _, err = s.Status(ctx, query("c1", t0.Add(lease)))
	want(t, res, err, guard.CodeNotFound, guard.DeliveryFresh)
	// Released, the key runs again.
	mustReserve(t, s, write("c2", "k:1", "f1", "tok2", t0.Add(lease)))
	wantRecords(t, s, 4)
}

// TestStatusLost: nothing stored, a query naming its tool and key gets a
// lost Pending; a receipt found is answered but not stored (rules 15, 16).
func TestStatusLost(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	q := query("op-1", t0)
	q.Tool, q.IdempotencyKey = "put", "k:1"
	res, p, err := s.Status(ctx, q)
	if err != nil || res != nil || p == nil || !p.Lost || p.OperationID != "op-1" || p.IdempotencyKey != "k:1" {
		t.Fatalf("status: %v %+v %v", res, p, err)
	}
	res, err = s.Settle(ctx, q, p, guard.ReceiptFound, []byte(`{"n":1}`))
	want(t, res, err, guard.CodeOK, guard.DeliveryReceiptReconciled)
	if string(res.Data) != `{"n":1}` {
		t.Fatalf("data %s", res.Data)
	}
	recs, _, _ := s.Audit(ctx, "t", 0, 10)
	if len(recs) != 1 || recs[0].SideEffect != guard.SideEffectYes {
		t.Fatalf("audit %+v", recs)
	}
	if _, p, _ := s.Status(ctx, q); p == nil || !p.Lost {
		t.Fatalf("the lost record was stored: %+v", p)
	}
}

// TestCommitOverAnotherIntent: a commit whose key was released and taken
// by another intent never overwrites it, and its OK becomes an unknown
// outcome without data (rule 13).
func TestCommitOverAnotherIntent(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	first := write("c1", "k:1", "f1", "tok1", t0)
	mustReserve(t, s, first)
	// Lease over, receipt absent: a status query releases the key.
	q := query("c1", t0.Add(lease))
	_, p, _ := s.Status(ctx, q)
	q.Tool, q.Fingerprint, q.IdempotencyKey = p.Tool, p.Fingerprint, p.IdempotencyKey
	res, err := s.Settle(ctx, q, p, guard.ReceiptAbsent, nil)
	want(t, res, err, guard.CodeNotFound, guard.DeliveryFresh)
	other := write("c2", "k:1", "f2", "tok2", t0.Add(lease))
	mustReserve(t, s, other)
	first.Code, first.Data = guard.CodeOK, []byte(`{"n":1}`)
	res, err = s.Commit(ctx, first)
	want(t, res, err, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if res.Data != nil || res.OperationID != "c1" {
		t.Fatalf("late commit answered %s", res)
	}
	other.Code, other.Data = guard.CodeOK, []byte(`{"n":2}`)
	res, err = s.Commit(ctx, other)
	want(t, res, err, guard.CodeOK, guard.DeliveryFresh)
	if string(res.Data) != `{"n":2}` {
		t.Fatalf("the other intent's commit answered %s", res)
	}
}

// TestTTL: with a TTL, what was not changed for that long on the guard's
// clock is forgotten; the audit log stays.
func TestTTL(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{TTL: time.Hour})
	read := &guard.Entry{TenantID: "t", SubjectID: "s", CallID: "c1", OperationID: "c1", Tool: "get",
		Fingerprint: "f1", Now: t0, Code: guard.CodeOK, Data: []byte(`1`), SideEffect: guard.SideEffectNone,
		AuditBody: []byte(`{"contract":"tool-audit-v2","action":"dispatch"}`)}
	res, err := s.Finish(ctx, read)
	want(t, res, err, guard.CodeOK, guard.DeliveryFresh)
	read.Fingerprint, read.Now = "f2", t0.Add(59*time.Minute)
	res, err = s.Finish(ctx, read)
	want(t, res, err, guard.CodeCallIDConflict, guard.DeliveryFresh)
	read.Now = t0.Add(time.Hour)
	res, err = s.Finish(ctx, read)
	want(t, res, err, guard.CodeOK, guard.DeliveryFresh)
	wantRecords(t, s, 3)
}

// TestErrorsChangeNothing: a call the store refuses is neither stored nor
// audited (rule 21).
func TestErrorsChangeNothing(t *testing.T) {
	s := guard.NewMemStore(guard.MemStoreOptions{})
	done, cancel := context.WithCancel(ctx)
	cancel()
	e := write("c1", "k:1", "f1", "", t0)
	if _, err := s.Reserve(ctx, e, lease); err == nil {
		t.Error("reserve without a token")
	}
	e.Token = "tok1"
	if _, err := s.Reserve(done, e, lease); err == nil {
		t.Error("reserve with a done context")
	}
	if _, err := s.Finish(ctx, e); err == nil {
		t.Error("finish without a code")
	}
	wantRecords(t, s, 0)
	mustReserve(t, s, e)
}
