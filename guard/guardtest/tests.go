package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
)

var alice = Principal("tenant-a", "alice")

func testReadBindsCallID(t *testing.T, w *World) {
	r := w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"k1"}`, CallID: "c1"})
	Want(t, r, guard.CodeOK, guard.DeliveryFresh)
	again := w.Dispatch(t, alice, Req{Tool: "get", Args: `{ "key" : "k1" }`, CallID: "c1"})
	Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
	if string(again.Data) != string(r.Data) {
		t.Fatalf("replayed data %s, want %s", again.Data, r.Data)
	}
}

func testCallIDConflict(t *testing.T, w *World) {
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"k1"}`, CallID: "c1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"k2"}`, CallID: "c1"}), guard.CodeCallIDConflict, guard.DeliveryFresh)
	// The conflict did not overwrite the original binding.
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"k1"}`, CallID: "c1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	// A conflict is also a check failure: it wins over everything after it.
	Want(t, w.Dispatch(t, alice, Req{Tool: "no_such_tool", Args: `{}`, CallID: "c1"}), guard.CodeCallIDConflict, guard.DeliveryFresh)
}

func testFailedCheckReplay(t *testing.T, w *World) {
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"secret-1"}`, CallID: "c1"}), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"secret-1"}`, CallID: "c1"}), guard.CodeNotFound, guard.DeliveryLocalReplay)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":1}`, CallID: "c2"}), guard.CodeInvalidArguments, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":1}`, CallID: "c2"}), guard.CodeInvalidArguments, guard.DeliveryLocalReplay)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":`, CallID: "c3"}), guard.CodeInvalidArguments, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":`, CallID: "c3"}), guard.CodeInvalidArguments, guard.DeliveryLocalReplay)
}

func testWriteOnce(t *testing.T, w *World) {
	first := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"})
	Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	// Another call id, same key and intent: a replay, without running.
	again := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"value":"1","key":"a"}`, CallID: "c2", Key: "idem-1"})
	Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
	if string(again.Data) != string(first.Data) {
		t.Fatalf("replayed %s, want %s", again.Data, first.Data)
	}
	// The same call id again: also a replay.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}
}

func testIdempotencyConflict(t *testing.T, w *World) {
	first := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"})
	Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"2"}`, CallID: "c2", Key: "idem-1"}), guard.CodeIdempotencyConflict, guard.DeliveryFresh)
	// The conflicting call id keeps its conflict; the key keeps the original.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"2"}`, CallID: "c2", Key: "idem-1"}), guard.CodeIdempotencyConflict, guard.DeliveryLocalReplay)
	again := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c3", Key: "idem-1"})
	Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
	if string(again.Data) != string(first.Data) || w.Down.Writes() != 1 {
		t.Fatalf("after conflict: data %s writes %d, want %s and 1", again.Data, w.Down.Writes(), first.Data)
	}
}

func testNotStartedFreesKey(t *testing.T, w *World) {
	w.Down.FailNext(guard.CodeTimeoutBeforeExecute, true)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeTimeoutBeforeExecute, guard.DeliveryFresh)
	// Not replayed: the same call id and key run again and execute.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	// A failed check before the reservation leaves the key free too.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"b"}`, CallID: "c2", Key: "idem-2"}), guard.CodeInvalidArguments, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"b","value":"2"}`, CallID: "c3", Key: "idem-2"}), guard.CodeOK, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d side effects, want 2", n)
	}
}

func testUnknownNeverBlind(t *testing.T, w *World) {
	w.Down.FailNext(guard.CodeOutcomeUnknown, false)
	r := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"})
	Want(t, r, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if r.OperationID != "c1" {
		t.Fatalf("operation id %q, want the call id c1 (the default)", r.OperationID)
	}
	for i, call := range []string{"c1", "c2"} {
		Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: call, Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
		if n := w.Down.Writes(); n != 1 {
			t.Fatalf("retry %d: %d side effects, want 1", i, n)
		}
	}
}

func testStatusReconciles(t *testing.T, w *World) {
	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	s := w.Status(t, alice, "c1")
	Want(t, s, guard.CodeOK, guard.DeliveryReceiptReconciled)
	var out map[string]any
	if err := json.Unmarshal(s.Data, &out); err != nil || out["value"] != "1" {
		t.Fatalf("reconciled data %s", s.Data)
	}
	Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryLocalReplay)
	// The key and the original call id now replay the settled result.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c9", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}
}

func testStatusStaysUnknown(t *testing.T, w *World) {
	w.Down.FailNext(guard.CodeOutcomeUnknown, false)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	s := w.Status(t, alice, "c1")
	Want(t, s, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if s.OperationID != "c1" {
		t.Fatalf("operation id %q, want c1", s.OperationID)
	}
	Want(t, w.Status(t, alice, "never-ran"), guard.CodeNotFound, guard.DeliveryFresh)
}

func testInProgress(t *testing.T, w *World) {
	entered, release := w.Down.Block()
	defer release()
	done := goDispatch(w, alice, "put", `{"key":"a","value":"1"}`, "c1", "idem-1")
	done.entered(t, entered)
	r := w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"})
	Want(t, r, guard.CodeInProgress, guard.DeliveryFresh)
	if r.RetryAfter <= 0 || r.RetryAfter > Lease {
		t.Fatalf("retry after %v, want within the lease %v", r.RetryAfter, Lease)
	}
	Want(t, w.Status(t, alice, "c1"), guard.CodeInProgress, guard.DeliveryFresh)
	release()
	Want(t, done.wait(t), guard.CodeOK, guard.DeliveryFresh)
	// IN_PROGRESS is not replayed: the second call id now gets the result.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
}

func testLeaseExpiry(t *testing.T, w *World) {
	entered, release := w.Down.Block()
	defer release()
	done := goDispatch(w, alice, "put", `{"key":"a","value":"1"}`, "c1", "idem-1")
	done.entered(t, entered)
	// The holder looks dead: its lease runs out on the guard's clock.
	w.Advance(Lease + time.Second)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects after lease expiry, want 1 (never re-executed)", n)
	}
	// The holder was alive after all: its commit tells the truth.
	release()
	Want(t, done.wait(t), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryLocalReplay)
	// A read has no reservation: it simply runs again.
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"a"}`, CallID: "r1"}), guard.CodeOK, guard.DeliveryFresh)
}

func testConcurrentSameKey(t *testing.T, w *World) {
	const n = 50
	var wg sync.WaitGroup
	results := make([]*guard.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = w.TryDispatch(alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: fmt.Sprintf("c%d", i), Key: "idem-1"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	fresh := 0
	for i, r := range results {
		switch {
		case r.Code == guard.CodeOK && r.Delivery == guard.DeliveryFresh:
			fresh++
		case r.Code == guard.CodeOK && r.Delivery == guard.DeliveryLocalReplay, r.Code == guard.CodeInProgress:
		default:
			t.Errorf("caller %d got %s", i, r)
		}
	}
	if fresh != 1 || w.Down.Writes() != 1 {
		t.Fatalf("%d fresh results and %d side effects, want 1 and 1", fresh, w.Down.Writes())
	}
	if got, err := guard.VerifyAudit(context.Background(), w.Store, alice.TenantID); err != nil || got != n {
		t.Fatalf("audit: %d records, err %v; want %d and a valid chain", got, err, n)
	}
}

func testScopesIsolated(t *testing.T, w *World) {
	bob := Principal("tenant-a", "bob")
	other := Principal("tenant-b", "alice")
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	// The same call id and key in another subject or tenant are theirs.
	Want(t, w.Dispatch(t, bob, Req{Tool: "put", Args: `{"key":"a","value":"2"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, other, Req{Tool: "put", Args: `{"key":"a","value":"3"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 3 {
		t.Fatalf("%d side effects, want 3", n)
	}
}

func testHostileIDs(t *testing.T, w *World) {
	hostile := []guard.Principal{
		Principal("t{a}", "s"), Principal("t", "{a}"), Principal("t:a", "b"), Principal("t", "a:b"),
		Principal("t\na", "b\r\n"), Principal("}{", "::"), Principal("tg:{t}:c", "x"), Principal("租户", "用户"),
	}
	for i, p := range hostile {
		call := fmt.Sprintf("call:{%d}\n", i)
		Want(t, w.Dispatch(t, p, Req{Tool: "put", Args: fmt.Sprintf(`{"key":"k","value":"%d"}`, i), CallID: call, Key: "idem:{x}"}), guard.CodeOK, guard.DeliveryFresh)
	}
	if n := w.Down.Writes(); n != len(hostile) {
		t.Fatalf("%d side effects, want %d: hostile ids made two scopes meet", n, len(hostile))
	}
	perTenant := map[string]int64{}
	for _, p := range hostile {
		perTenant[p.TenantID]++
	}
	for tenant, want := range perTenant {
		if n, err := guard.VerifyAudit(context.Background(), w.Store, tenant); err != nil || n != want {
			t.Fatalf("tenant %q: %d audit records, %v; want %d", tenant, n, err, want)
		}
	}
}

func testStatusOtherPrincipal(t *testing.T, w *World) {
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Status(t, Principal("tenant-a", "bob"), "c1"), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.Status(t, Principal("tenant-b", "alice"), "c1"), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryLocalReplay)
}

func testAuditChain(t *testing.T, w *World) {
	ctx := context.Background()
	w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"a"}`, CallID: "c1"})
	w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"})
	w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c3", Key: "idem-1"})
	w.Dispatch(t, alice, Req{Tool: "nope", Args: `{}`, CallID: "c4"})
	w.Status(t, alice, "c2")
	n, err := guard.VerifyAudit(ctx, w.Store, alice.TenantID)
	if err != nil || n != 5 {
		t.Fatalf("VerifyAudit: %d records, %v; want 5, nil", n, err)
	}
	recs, head, err := w.Store.Audit(ctx, alice.TenantID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if head.Seq != 5 || head.Hash != recs[4].Hash {
		t.Fatalf("head %+v, want seq 5 and the last hash", head)
	}
	want := []struct {
		code guard.Code
		del  guard.Delivery
		side guard.SideEffect
		act  string
	}{
		{guard.CodeOK, guard.DeliveryFresh, guard.SideEffectNone, "dispatch"},
		{guard.CodeOK, guard.DeliveryFresh, guard.SideEffectYes, "dispatch"},
		{guard.CodeOK, guard.DeliveryLocalReplay, guard.SideEffectNone, "dispatch"},
		{guard.CodeUnknownTool, guard.DeliveryFresh, guard.SideEffectNone, "dispatch"},
		{guard.CodeOK, guard.DeliveryLocalReplay, guard.SideEffectNone, "query_status"},
	}
	for i, r := range recs {
		var body guard.AuditBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if r.Code != want[i].code || r.Delivery != want[i].del || r.SideEffect != want[i].side || body.Action != want[i].act {
			t.Errorf("record %d: %s/%s/%s/%s, want %v", r.Seq, r.Code, r.Delivery, r.SideEffect, body.Action, want[i])
		}
		if body.Principal.TenantID != alice.TenantID || body.Principal.SubjectID != alice.SubjectID {
			t.Errorf("record %d: principal %+v", r.Seq, body.Principal)
		}
	}
	// The write ran under a grant: the record names it and its approver.
	var body guard.AuditBody
	_ = json.Unmarshal(recs[1].Body, &body)
	if body.Approval == nil || body.Approval.Approver != "tester" || body.Approval.GrantID == "" {
		t.Errorf("write record approval %+v", body.Approval)
	}
	if body.Arguments != nil {
		t.Errorf("arguments %s logged though the tool marks none safe", body.Arguments)
	}
	if len(body.Fingerprint) != 64 {
		t.Errorf("fingerprint %q", body.Fingerprint)
	}
}

// testCommitRetry: the guard retries a commit whose reply was lost. A commit
// applied once and sent again with the same token changes nothing, audits
// nothing more, and answers as the first did.
func testCommitRetry(t *testing.T, w *World) {
	ctx := context.Background()
	for i, tc := range []struct {
		code guard.Code
		data string
	}{
		{guard.CodeOK, `{"n":1}`},
		{guard.CodeOutcomeUnknown, ""},
		{guard.CodeTimeoutBeforeExecute, ""},
	} {
		e := writeEntry(w, 10+i, fmt.Sprintf("token-%d", i))
		answer, err := w.Store.Reserve(ctx, e, Lease)
		if err != nil || answer != nil {
			t.Fatalf("%s: reserve: %v %v", tc.code, answer, err)
		}
		e.Code, e.Data = tc.code, []byte(tc.data)
		first, err := w.Store.Commit(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		_, before, _ := w.Store.Audit(ctx, "tenant-c", 0, 1)
		again, err := w.Store.Commit(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := w.Store.Audit(ctx, "tenant-c", 0, 1)
		if again.Code != first.Code || string(again.Data) != string(first.Data) || again.OperationID != first.OperationID {
			t.Errorf("%s: retried commit answered %s, the first %s", tc.code, again, first)
		}
		if after.Seq != before.Seq {
			t.Errorf("%s: the retried commit appended %d audit records", tc.code, after.Seq-before.Seq)
		}
	}
	if n, err := guard.VerifyAudit(ctx, w.Store, "tenant-c"); err != nil || n != 3 {
		t.Fatalf("audit: %d records, %v; want 3", n, err)
	}
}

// goDispatch runs a dispatch on another goroutine. Its result is read on
// the test's goroutine, where failing is allowed, with wait.
func goDispatch(w *World, p guard.Principal, tool, args, callID, key string) *pendingCall {
	pc := &pendingCall{ch: make(chan dispatchAnswer, 1), what: tool + " " + args}
	go func() {
		res, err := w.TryDispatch(p, Req{Tool: tool, Args: args, CallID: callID, Key: key})
		pc.ch <- dispatchAnswer{res, err}
	}()
	return pc
}

type dispatchAnswer struct {
	res *guard.Result
	err error
}

// pendingCall is a dispatch running on another goroutine.
type pendingCall struct {
	ch   chan dispatchAnswer
	got  *dispatchAnswer
	what string
}

// entered waits until the blocked write has started, and fails the test if
// the dispatch ended without running it, or after callTimeout.
func (pc *pendingCall) entered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case a := <-pc.ch:
		pc.got = &a
		t.Fatalf("Dispatch(%s) ended without running the write: %v %v", pc.what, a.res, a.err)
	case <-time.After(callTimeout):
		t.Fatalf("Dispatch(%s): the write never ran within %v", pc.what, callTimeout)
	}
}

// wait returns the dispatch's result, failing the test on a host error or
// when it does not return within callTimeout and a grace.
func (pc *pendingCall) wait(t *testing.T) *guard.Result {
	t.Helper()
	if pc.got == nil {
		select {
		case a := <-pc.ch:
			pc.got = &a
		case <-time.After(callTimeout + 2*time.Second):
			t.Fatalf("Dispatch(%s) never returned", pc.what)
		}
	}
	if pc.got.err != nil {
		t.Fatalf("Dispatch(%s): %v", pc.what, pc.got.err)
	}
	return pc.got.res
}

// writeEntry is a write's store entry as the guard makes it, for tests that
// drive the store directly.
func writeEntry(w *World, i int, token string) *guard.Entry {
	return &guard.Entry{
		TenantID: "tenant-c", SubjectID: "s", CallID: fmt.Sprintf("call-%d", i), OperationID: fmt.Sprintf("op-%d", i),
		IdempotencyKey: fmt.Sprintf("k:key-%d", i), Tool: "put", Fingerprint: fmt.Sprintf("%064d", i),
		Effect: guard.Write, Now: w.Now(), SideEffect: guard.SideEffectYes, Token: token,
		AuditBody: []byte(`{"contract":"tool-audit-v2","action":"dispatch"}`),
	}
}

// testReserveRetry: a client retries a reservation whose reply was lost.
// The copy finds its own token: the same reservation, nothing audited; a
// caller with another token finds the key in progress.
func testReserveRetry(t *testing.T, w *World) {
	ctx := context.Background()
	e := writeEntry(w, 1, "token-a")
	for i := range 2 {
		if answer, err := w.Store.Reserve(ctx, e, Lease); err != nil || answer != nil {
			t.Fatalf("reserve #%d with the same token: %v, %v; want the reservation (nil, nil)", i+1, answer, err)
		}
	}
	other := writeEntry(w, 1, "token-b")
	other.CallID = "call-other"
	answer, err := w.Store.Reserve(ctx, other, Lease)
	if err != nil || answer == nil || answer.Code != guard.CodeInProgress {
		t.Fatalf("reserve with another token: %v, %v; want IN_PROGRESS", answer, err)
	}
	e.Code, e.Data = guard.CodeOK, []byte(`{"n":1}`)
	if res, err := w.Store.Commit(ctx, e); err != nil || res.Code != guard.CodeOK {
		t.Fatalf("commit: %v, %v", res, err)
	}
	if n, err := guard.VerifyAudit(ctx, w.Store, "tenant-c"); err != nil || n != 2 {
		t.Fatalf("audit: %d records, %v; want 2 (the IN_PROGRESS answer and the commit)", n, err)
	}
}

// testReserveSaysReserved: the guard must know whether a reservation was
// made now or stood already under its token (a durable step run again,
// whose earlier run may have executed the write): Entry.Reserved.
func testReserveSaysReserved(t *testing.T, w *World) {
	ctx := context.Background()
	e := writeEntry(w, 3, "token-a")
	if answer, err := w.Store.Reserve(ctx, e, Lease); err != nil || answer != nil || !e.Reserved {
		t.Fatalf("first reserve: %v, %v, Reserved %v; want the reservation, made now", answer, err, e.Reserved)
	}
	again := writeEntry(w, 3, "token-a")
	if answer, err := w.Store.Reserve(ctx, again, Lease); err != nil || answer != nil || again.Reserved {
		t.Fatalf("reserve with the same token: %v, %v, Reserved %v; want the reservation, standing already", answer, err, again.Reserved)
	}
}

// testStepRunAgain: a durable step's write reserved and executed, and its
// process died before the commit (here: the write is held after its side
// effect). The engine runs the step again with the same Call.Step: it is
// answered OK from the put's receipt, not IN_PROGRESS, and nothing runs
// twice; another step of the same intent is IN_PROGRESS. The held run's
// late commit changes nothing.
func testStepRunAgain(t *testing.T, w *World) {
	const args = `{"key":"s","value":"1"}`
	call := w.Call(alice, Req{Tool: "put", Args: args, CallID: "c1"})
	call.Context.Scope = "run-1"
	call.Approval = w.Grant(t, alice, "put", args)
	call.Step = "run-1/step-3"
	entered, release := w.Down.Block()
	defer release()
	pc := &pendingCall{ch: make(chan dispatchAnswer, 1), what: "put " + args}
	go func() {
		res, err := bounded(func(ctx context.Context) (*guard.Result, error) { return w.Guard.Dispatch(ctx, call) })
		pc.ch <- dispatchAnswer{res, err}
	}()
	pc.entered(t, entered)
	other := call
	other.Step, other.Context.CallID = "run-1/step-7", "c2"
	Want(t, w.DispatchCall(t, other), guard.CodeInProgress, guard.DeliveryFresh)
	res := w.DispatchCall(t, call)
	Want(t, res, guard.CodeOK, guard.DeliveryFresh)
	if w.Down.Writes() != 1 || !strings.Contains(string(res.Data), `"write":1`) {
		t.Fatalf("the step run again: %s, %d side effects; want the receipt of the one write", res, w.Down.Writes())
	}
	release()
	Want(t, pc.wait(t), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.DispatchCall(t, call), guard.CodeOK, guard.DeliveryLocalReplay)
	if w.Down.Writes() != 1 {
		t.Fatalf("%d side effects, want 1", w.Down.Writes())
	}
}

// testReleaseRefusesLateCopy: the guard could not confirm a reservation and
// released it by its token (a commit of UNAVAILABLE). The key is free for
// others, and a copy of the released reservation arriving late reserves
// nothing.
func testReleaseRefusesLateCopy(t *testing.T, w *World) {
	ctx := context.Background()
	e := writeEntry(w, 2, "token-a")
	if answer, err := w.Store.Reserve(ctx, e, Lease); err != nil || answer != nil {
		t.Fatalf("reserve: %v, %v", answer, err)
	}
	e.Code, e.SideEffect = guard.CodeUnavailable, guard.SideEffectNone
	if res, err := w.Store.Commit(ctx, e); err != nil || res.Code != guard.CodeUnavailable {
		t.Fatalf("release: %v, %v; want UNAVAILABLE", res, err)
	}
	late := writeEntry(w, 2, "token-a")
	if answer, err := w.Store.Reserve(ctx, late, Lease); err != nil || answer == nil {
		t.Fatalf("late copy of the released reservation: %v, %v; want an answer, not a reservation", answer, err)
	}
	next := writeEntry(w, 2, "token-b")
	next.CallID = "call-next"
	if answer, err := w.Store.Reserve(ctx, next, Lease); err != nil || answer != nil {
		t.Fatalf("reserve after the release: %v, %v; want the key free", answer, err)
	}
}

// testAbsentReceiptFreesKey: a reservation was stored but its reply lost,
// and the release could not reach the store either, so the write never ran.
// While the lease holds the key is in progress and a receipt that finds
// nothing proves nothing; after it, that receipt settles the operation as
// not run, and the retry executes once.
func testAbsentReceiptFreesKey(t *testing.T, w *World) {
	ctx := context.Background()
	args := `{"key":"a","value":"1"}`
	fp := guard.Fingerprint("put", []byte(args))
	e := &guard.Entry{TenantID: alice.TenantID, SubjectID: alice.SubjectID, CallID: "c1", OperationID: "c1",
		IdempotencyKey: "k:idem-1", Tool: "put", Fingerprint: fp, Effect: guard.Write, Now: w.Now(),
		SideEffect: guard.SideEffectNone, Token: "lost-token", AuditBody: []byte(`{"contract":"tool-audit-v2"}`)}
	if answer, err := w.Store.Reserve(ctx, e, Lease); err != nil || answer != nil {
		t.Fatalf("reserve: %v, %v", answer, err)
	}
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}), guard.CodeInProgress, guard.DeliveryFresh)
	Want(t, w.Status(t, alice, "c1"), guard.CodeInProgress, guard.DeliveryFresh)
	w.Advance(Lease + time.Second)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	Want(t, w.Status(t, alice, "c1"), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c2", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}
	if _, err := guard.VerifyAudit(ctx, w.Store, alice.TenantID); err != nil {
		t.Fatal(err)
	}
}

// testOperationIDFirst: operation ids a host chooses share one space with
// the call ids that name operations by default (rule 4 of guard.Store).
func testOperationIDFirst(t *testing.T, w *World) {
	dispatch := func(tool, args, callID, key, op string) *guard.Result {
		t.Helper()
		res, err := w.tryDispatch(alice, Req{Tool: tool, Args: args, CallID: callID, Key: key}, op)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	value := func(res *guard.Result) any {
		t.Helper()
		var out map[string]any
		if err := json.Unmarshal(res.Data, &out); err != nil {
			t.Fatalf("%v %s: %v", res.Code, res.Data, err)
		}
		return out["value"]
	}
	Want(t, dispatch("put", `{"key":"a","value":"1"}`, "w1", "idem-1", ""), guard.CodeOK, guard.DeliveryFresh)

	// A read names operation x first; a write that the host calls x too
	// takes the id over: a write's outcome is what a status query is for.
	Want(t, dispatch("get", `{"key":"a"}`, "x", "", ""), guard.CodeOK, guard.DeliveryFresh)
	Want(t, dispatch("put", `{"key":"b","value":"2"}`, "y", "idem-2", "x"), guard.CodeOK, guard.DeliveryFresh)
	s := w.Status(t, alice, "x")
	Want(t, s, guard.CodeOK, guard.DeliveryLocalReplay)
	if v := value(s); v != "2" {
		t.Fatalf("status of x: value %v, want the write y's 2", v)
	}

	// A write names operation p first (its call id); another write that
	// the host calls p does not take it over.
	Want(t, dispatch("put", `{"key":"c","value":"3"}`, "p", "idem-3", ""), guard.CodeOK, guard.DeliveryFresh)
	Want(t, dispatch("put", `{"key":"d","value":"4"}`, "q", "idem-4", "p"), guard.CodeOK, guard.DeliveryFresh)
	if v := value(w.Status(t, alice, "p")); v != "3" {
		t.Fatalf("status of p: value %v, want the first write's 3", v)
	}

	// A read the host calls z comes first; the call whose own id is z
	// later does not take the id over.
	Want(t, dispatch("get", `{"key":"a"}`, "r", "", "z"), guard.CodeOK, guard.DeliveryFresh)
	Want(t, dispatch("get", `{"key":"c"}`, "z", "", ""), guard.CodeOK, guard.DeliveryFresh)
	s = w.Status(t, alice, "z")
	if s.Code != guard.CodeOK || value(s) != "1" {
		t.Fatalf("status of z: %v %s, want the read r's OK with value 1", s.Code, s.Data)
	}
	if n := w.Down.Writes(); n != 4 {
		t.Fatalf("%d side effects, want 4", n)
	}
}

// testEmptyOperationID: a call with neither a call id nor an operation id
// is indexed under no id; a status query that names none finds only the
// record of the key it names, and only an operation that ran under no id.
func testEmptyOperationID(t *testing.T, w *World) {
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: `{"key":"a","value":"1"}`, Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"a"}`, Key: "idem-2"}), guard.CodeOK, guard.DeliveryFresh)
	if s := w.Status(t, alice, ""); s.Code != guard.CodeNotFound {
		t.Fatalf("a status query naming no operation and no key: %s %s, want NOT_FOUND (the empty id names nothing)", s.Code, s.Data)
	}
	if s := w.StatusOf(t, alice, "", Req{Tool: "get"}); s.Code != guard.CodeNotFound {
		t.Fatalf("a status query of a read naming no operation: %s %s, want NOT_FOUND", s.Code, s.Data)
	}
	s := w.StatusOf(t, alice, "", Req{Tool: "put", Key: "idem-1"})
	Want(t, s, guard.CodeOK, guard.DeliveryLocalReplay)
	if !strings.Contains(string(s.Data), `"1"`) {
		t.Fatalf("the status of the write under idem-1: %s, want its result", s.Data)
	}
	// A write with an operation id of its own is not found without it.
	res, err := w.tryDispatch(alice, Req{Tool: "put", Args: `{"key":"b","value":"2"}`, Key: "idem-3"}, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	Want(t, res, guard.CodeOK, guard.DeliveryFresh)
	if s := w.StatusOf(t, alice, "", Req{Tool: "put", Key: "idem-3"}); s.Code == guard.CodeOK {
		t.Fatalf("a query naming no operation answered with op-1's result %s: a record answers only for the operation it ran under", s.Data)
	}
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d side effects, want 2", n)
	}
}

// testCallIDOfNamedOperation: a write the host gave an operation id of its
// own is found by that id; its call id names no operation for a status
// query (the record answers only for the id it ran under), after its
// commit, after a retry of the call id replayed it, and after a status
// query settled it from its receipt, while a retry of the call id still
// replays it.
func testCallIDOfNamedOperation(t *testing.T, w *World) {
	args := `{"key":"b","value":"2"}`
	res, err := w.tryDispatch(alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	Want(t, res, guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.Status(t, alice, "op-1"), guard.CodeOK, guard.DeliveryLocalReplay)
	if s := w.Status(t, alice, "c1"); s.Code != guard.CodeNotFound {
		t.Fatalf("a status query naming the call id c1 of operation op-1: %s %s, want NOT_FOUND", s.Code, s.Data)
	}
	res, err = w.tryDispatch(alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	Want(t, res, guard.CodeOK, guard.DeliveryLocalReplay)
	if s := w.Status(t, alice, "c1"); s.Code != guard.CodeNotFound {
		t.Fatalf("after a replay, a status query naming the call id c1: %s %s, want NOT_FOUND", s.Code, s.Data)
	}
	// Settled from its receipt, the same holds.
	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	args = `{"key":"c","value":"3"}`
	res, err = w.tryDispatch(alice, Req{Tool: "put", Args: args, CallID: "c2", Key: "idem-2"}, "op-2")
	if err != nil {
		t.Fatal(err)
	}
	Want(t, res, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "op-2", Req{Tool: "put", Key: "idem-2"}), guard.CodeOK, guard.DeliveryReceiptReconciled)
	if s := w.Status(t, alice, "c2"); s.Code != guard.CodeNotFound {
		t.Fatalf("after a settle, a status query naming the call id c2 of operation op-2: %s %s, want NOT_FOUND", s.Code, s.Data)
	}
	Want(t, w.Status(t, alice, "op-2"), guard.CodeOK, guard.DeliveryLocalReplay)
	res, err = w.tryDispatch(alice, Req{Tool: "put", Args: args, CallID: "c2", Key: "idem-2"}, "op-2")
	if err != nil {
		t.Fatal(err)
	}
	Want(t, res, guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d side effects, want 2", n)
	}
}
