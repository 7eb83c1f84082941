package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// unknownWrite dispatches a put whose reply is lost: OUTCOME_UNKNOWN, no
// receipt.
func unknownWrite(t *testing.T, w *guardtest.World, callID, key string) {
	t.Helper()
	w.Down.FailNext(guard.CodeOutcomeUnknown, false)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: callID, Key: key}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
}

// heldWrite starts a put that blocks after writing, holding its
// reservation, and returns a function that lets it commit and returns its
// result. Every put dispatched meanwhile blocks too.
func heldWrite(t *testing.T, w *guardtest.World, callID, key string) func() *guard.Result {
	t.Helper()
	entered, release := w.Down.Block()
	done := make(chan *guard.Result, 1)
	go func() {
		done <- w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"2"}`, CallID: callID, Key: key})
	}()
	<-entered
	t.Cleanup(release)
	return func() *guard.Result { release(); return <-done }
}

// lastAudit returns the tenant's last audit record, its body decoded, after
// checking the whole chain.
func lastAudit(t *testing.T, s *idem.Store) (guard.AuditRecord, map[string]any) {
	t.Helper()
	ctx := context.Background()
	n, err := guard.VerifyAudit(ctx, s, "tenant-a")
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	recs, _, err := s.Audit(ctx, "tenant-a", n-1, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("last record: %v, %v", recs, err)
	}
	var body map[string]any
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	return recs[0], body
}

// wantResolveAudit checks that the tenant's last audit record is the
// resolution of operation c1 (key idem-1) by the operator.
func wantResolveAudit(t *testing.T, s *idem.Store, operator, verdict string, code guard.Code, side guard.SideEffect) {
	t.Helper()
	rec, body := lastAudit(t, s)
	ctxb, _ := body["context"].(map[string]any)
	if body["action"] != "resolve" || body["operator"] != operator || body["resolution"] != verdict ||
		body["tool"] != "put" || body["fingerprint"] == "" || ctxb["operation_id"] != "c1" ||
		ctxb["idempotency_key"] != "idem-1" || ctxb["call_id"] != "c1" || rec.Code != code || rec.SideEffect != side {
		t.Fatalf("audit record %+v body %s", rec, rec.Body)
	}
}

func TestUnsettled(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		start := w.Now()
		unknownWrite(t, w, "c1", "idem-1")
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"c","value":"3"}`, CallID: "c3", Key: "idem-3"}), guard.CodeOK, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "r1", Key: "read-1"}), guard.CodeOK, guard.DeliveryFresh)
		w.Down.FailNext(guard.CodeOutcomeUnknown, false)
		guardtest.Want(t, w.Dispatch(t, guardtest.Principal("tenant-b", "bob"), guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}),
			guard.CodeOutcomeUnknown, guard.DeliveryFresh)
		finish := heldWrite(t, w, "c2", "idem-2") // puts wait from here until finish

		// Within the lease only the unknown outcome is unsettled.
		got, err := s.Unsettled(ctx, "tenant-a", w.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].State != guard.StateUnknown || got[0].IdempotencyKey != "k:idem-1" ||
			got[0].OperationID != "c1" || got[0].CallID != "c1" || got[0].Tool != "put" || got[0].SubjectID != "alice" ||
			got[0].TenantID != "tenant-a" || got[0].Fingerprint == "" || !got[0].LeaseExpiry.IsZero() {
			t.Fatalf("within the lease: %+v", got)
		}
		// Once the lease is over the held write is stuck.
		w.Advance(guardtest.Lease + time.Second)
		got, err = s.Unsettled(ctx, "tenant-a", w.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].State != guard.StateStuck || got[1].IdempotencyKey != "k:idem-2" ||
			got[1].OperationID != "c2" || !got[1].LeaseExpiry.Equal(start.Add(guardtest.Lease)) {
			t.Fatalf("after the lease: %+v", got)
		}
		if n := rdb.Exists(ctx, got[0].Record, got[1].Record).Val(); n != 2 {
			t.Errorf("%d of the listed records exist", n)
		}
		guardtest.Want(t, finish(), guard.CodeOK, guard.DeliveryFresh)
		if got, _ = s.Unsettled(ctx, "tenant-a", w.Now()); len(got) != 1 {
			t.Fatalf("after the late commit: %+v", got)
		}
		if got, _ = s.Unsettled(ctx, "nobody", w.Now()); len(got) != 0 {
			t.Fatalf("a tenant without records: %+v", got)
		}
	})
}

func TestResolveCommitted(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		unknownWrite(t, w, "c1", "idem-1")
		res, err := s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-1",
			Outcome: guard.OutcomeCommitted, Data: []byte(`{ "value": "1", "key": "a" }`), Operator: "alice@ops", Now: w.Now()})
		if err != nil {
			t.Fatal(err)
		}
		const data = `{"key":"a","value":"1"}` // canonical
		guardtest.Want(t, res, guard.CodeOK, guard.DeliveryFresh)
		if string(res.Data) != data {
			t.Fatalf("data %s", res.Data)
		}
		wantResolveAudit(t, s, "alice@ops", "committed", guard.CodeOK, guard.SideEffectYes)
		// A retry and a status query answer the resolved result; nothing ran again.
		r := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c9", Key: "idem-1"})
		guardtest.Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(r.Data) != data {
			t.Fatalf("replayed data %s", r.Data)
		}
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
		guardtest.Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryLocalReplay)
		if n := w.Down.Writes(); n != 1 {
			t.Fatalf("%d writes, want 1", n)
		}
		if got, _ := s.Unsettled(ctx, "tenant-a", w.Now()); len(got) != 0 {
			t.Fatalf("still unsettled: %+v", got)
		}
		// Resolving it again is refused, by key or by operation.
		_, err = s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", OperationID: "c1",
			Outcome: guard.OutcomeNotStarted, Operator: "bob@ops", Now: w.Now()})
		if !errors.Is(err, guard.ErrAlreadyCommitted) {
			t.Fatalf("resolving a committed record: %v", err)
		}
		if _, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestResolveNotExecuted(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		unknownWrite(t, w, "c1", "idem-1")
		// Found through the operation id.
		res, err := s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", OperationID: "c1",
			Outcome: guard.OutcomeNotStarted, Operator: "carol@ops", Now: w.Now()})
		if err != nil {
			t.Fatal(err)
		}
		guardtest.Want(t, res, guard.CodeNotFound, guard.DeliveryFresh)
		if !strings.Contains(res.Message, "operator") {
			t.Errorf("message %q", res.Message)
		}
		wantResolveAudit(t, s, "carol@ops", "not_started", guard.CodeNotFound, guard.SideEffectNone)
		// The key is free: a status query finds nothing, a retry runs.
		guardtest.Want(t, w.Status(t, alice, "c1"), guard.CodeNotFound, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
		if n := w.Down.Writes(); n != 2 {
			t.Fatalf("%d writes, want 2 (the retry ran)", n)
		}
		guardtest.Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryLocalReplay)
		_, err = s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-2",
			Outcome: guard.OutcomeNotStarted, Operator: "carol@ops", Now: w.Now()})
		if !errors.Is(err, guard.ErrNoRecord) {
			t.Fatalf("an absent key: %v", err)
		}
		if _, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	})
}

// A reservation whose lease has not run out is refused unless forced; forced, a late
// commit of its holder neither overwrites the resolution nor goes unaudited.
func TestResolveLiveReservation(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		finish := heldWrite(t, w, "c2", "idem-2")
		r := guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-2",
			Outcome: guard.OutcomeCommitted, Data: []byte(`{"forced":1}`), Operator: "dave@ops", Now: w.Now()}
		if _, err := s.Resolve(ctx, r); !errors.Is(err, guard.ErrLeaseActive) || !strings.Contains(err.Error(), "reserved until") {
			t.Fatalf("a live lease: %v", err)
		}
		r.Force = true
		res, err := s.Resolve(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		guardtest.Want(t, res, guard.CodeOK, guard.DeliveryFresh)
		if _, body := lastAudit(t, s); body["forced"] != true {
			t.Fatalf("a forced resolution's body: %v", body)
		}
		guardtest.Want(t, finish(), guard.CodeOK, guard.DeliveryLocalReplay)
		r2 := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"2"}`, CallID: "c5", Key: "idem-2"})
		guardtest.Want(t, r2, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(r2.Data) != `{"forced":1}` {
			t.Fatalf("data %s", r2.Data)
		}
		if _, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	})
}

// A stuck reservation resolved as not executed, whose holder then commits
// after all: the late commit is stored, as the truth it is.
func TestResolveStuckThenLateCommit(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		finish := heldWrite(t, w, "c2", "idem-2")
		w.Advance(guardtest.Lease + time.Second)
		res, err := s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-2",
			Outcome: guard.OutcomeNotStarted, Operator: "erin@ops", Now: w.Now()})
		if err != nil {
			t.Fatal(err)
		}
		guardtest.Want(t, res, guard.CodeNotFound, guard.DeliveryFresh)
		guardtest.Want(t, finish(), guard.CodeOK, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"2"}`, CallID: "c6", Key: "idem-2"}), guard.CodeOK, guard.DeliveryLocalReplay)
		if n := w.Down.Writes(); n != 1 {
			t.Fatalf("%d writes, want 1", n)
		}
	})
}

func TestResolveRefusals(t *testing.T) {
	ctx := context.Background()
	_, rdb := redistest.Mini(t)
	s := newStore(t, rdb)
	w := guardtest.NewWorld(t, s)
	unknownWrite(t, w, "c1", "idem-1")
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"secret"}`, CallID: "r1"}), guard.CodeNotFound, guard.DeliveryFresh)
	ok := guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-1",
		Outcome: guard.OutcomeCommitted, Data: []byte(`{}`), Operator: "o", Now: w.Now()}
	for _, tc := range []struct {
		name string
		edit func(r *guard.Resolution)
		want string
		is   error
	}{
		{"NoOperator", func(r *guard.Resolution) { r.Operator = "" }, "operator", nil},
		{"NoKey", func(r *guard.Resolution) { r.IdempotencyKey = "" }, "idempotency key or an operation id", nil},
		{"BadOutcome", func(r *guard.Resolution) { r.Outcome = "maybe" }, "unknown outcome", nil},
		{"BadJSON", func(r *guard.Resolution) { r.Data = []byte(`{"a":`) }, "result data", nil},
		{"DataNotExecuted", func(r *guard.Resolution) { r.Outcome = guard.OutcomeNotStarted }, "no result data", nil},
		{"OtherSubject", func(r *guard.Resolution) { r.SubjectID = "bob" }, "", guard.ErrNoRecord},
		{"UnknownOperation", func(r *guard.Resolution) { r.IdempotencyKey, r.OperationID = "", "nope" }, "", guard.ErrNoRecord},
		{"SettledRead", func(r *guard.Resolution) { r.IdempotencyKey, r.OperationID = "", "r1" }, "final result", guard.ErrAlreadyCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			_, err := s.Resolve(ctx, r)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err %v, want %q / %v", err, tc.want, tc.is)
			}
		})
	}
	// Nothing was resolved or audited by the refusals.
	if got, _ := s.Unsettled(ctx, "tenant-a", w.Now()); len(got) != 1 {
		t.Fatalf("unsettled after refusals: %+v", got)
	}
	if n, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil || n != 2 {
		t.Fatalf("%d records, %v; want the two dispatches only", n, err)
	}
}

// replaceField returns the stored record s with field i's bytes all set to
// c, and whether it has a non-empty field i.
func replaceField(s string, i int, c byte) (string, bool) {
	f := idem.DecodeFields(s)
	if i >= len(f) || f[i] == "" {
		return s, false
	}
	f[i] = strings.Repeat(string(c), len(f[i]))
	return string(idem.PackFields(f...)), true
}

// changeBeforeScript is a hook that rewrites a record's token just before a
// script runs: a reservation made again between the operator's read and
// the resolution.
type changeBeforeScript struct{ key string }

func (h *changeBeforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *changeBeforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *changeBeforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && h.key != "" {
			// The record's token (its 7th field) becomes another of the
			// same length.
			get := redis.NewStringCmd(ctx, "get", h.key)
			if err := next(ctx, get); err != nil {
				return err
			}
			changed, ok := replaceField(get.Val(), 6, 'z')
			if !ok {
				return fmt.Errorf("no token in record %q", get.Val())
			}
			if err := next(ctx, redis.NewCmd(ctx, "set", h.key, changed, "keepttl")); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func TestResolveRecordChanged(t *testing.T) {
	ctx := context.Background()
	_, rdb := redistest.Mini(t)
	s := newStore(t, rdb)
	w := guardtest.NewWorld(t, s)
	unknownWrite(t, w, "c1", "idem-1")
	got, err := s.Unsettled(ctx, "tenant-a", w.Now())
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	rdb.AddHook(&changeBeforeScript{key: got[0].Record})
	_, err = s.Resolve(ctx, guard.Resolution{TenantID: "tenant-a", SubjectID: "alice", IdempotencyKey: "k:idem-1",
		Outcome: guard.OutcomeNotStarted, Operator: "o", Now: w.Now()})
	if !errors.Is(err, guard.ErrRecordChanged) {
		t.Fatalf("err %v, want ErrRecordChanged", err)
	}
	if n := rdb.Exists(ctx, got[0].Record).Val(); n != 1 {
		t.Fatal("the changed record was deleted")
	}
	if n, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil || n != 1 {
		t.Fatalf("%d records, %v; the refused resolution must not be audited", n, err)
	}
}
