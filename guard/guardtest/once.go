package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolguard/toolguard/guard"
)

// testGrantOnce: one human approval is one execution, wherever the calls
// that present it come from (rule 22).
func testGrantOnce(t *testing.T, w *World) {
	ctx := context.Background()
	args := `{"key":"a","value":"1"}`
	approved := func(callID, key, grant string) *guard.Result {
		t.Helper()
		c := w.Call(alice, Req{Tool: "put", Args: args, CallID: callID, Key: key})
		c.Approval = grant
		return w.DispatchCall(t, c)
	}
	g := w.Grant(t, alice, "put", args)
	Want(t, approved("c1", "", g), guard.CodeOK, guard.DeliveryFresh)
	// The model repeats itself with new call ids, and the host passes the
	// same grant: none of them runs.
	for _, c := range []struct{ call, key string }{{"c2", ""}, {"c3", ""}, {"c4", "idem-4"}} {
		r := approved(c.call, c.key, g)
		Want(t, r, guard.CodeApprovalInvalid, guard.DeliveryFresh)
		if r.Message != guard.GrantUsedMessage {
			t.Fatalf("%s: message %q, want %q", c.call, r.Message, guard.GrantUsedMessage)
		}
	}
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects from one grant, want 1", n)
	}
	// The operation that spent it replays, with it or without it.
	Want(t, approved("c1", "", g), guard.CodeOK, guard.DeliveryLocalReplay)
	Want(t, approved("c1", "", ""), guard.CodeOK, guard.DeliveryLocalReplay)
	// APPROVAL_INVALID is not replayed: with a grant of its own, c2 runs.
	Want(t, approved("c2", "", w.Grant(t, alice, "put", args)), guard.CodeOK, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d side effects from two grants, want 2", n)
	}

	// A write that did not start paid for nothing: its grant comes back,
	// and pays for the next execution only.
	args = `{"key":"b","value":"2"}`
	g2 := w.Grant(t, alice, "put", args)
	w.Down.FailNext(guard.CodeTimeoutBeforeExecute, true)
	Want(t, approved("c5", "", g2), guard.CodeTimeoutBeforeExecute, guard.DeliveryFresh)
	Want(t, approved("c6", "", g2), guard.CodeOK, guard.DeliveryFresh)
	Want(t, approved("c7", "", g2), guard.CodeApprovalInvalid, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 3 {
		t.Fatalf("%d side effects, want 3", n)
	}

	// The audit log says which grant each execution spent, and which
	// refusal presented a spent one.
	if _, err := guard.VerifyAudit(ctx, w.Store, alice.TenantID); err != nil {
		t.Fatal(err)
	}
	first, err := w.Signer.Verify(g)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := w.Store.Audit(ctx, alice.TenantID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		var body guard.AuditBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Approval != nil && body.Approval.GrantID == first.ID {
			got = append(got, r.Code.String()+"/"+string(r.SideEffect))
		}
	}
	want := []string{"OK/yes", "APPROVAL_INVALID/no", "APPROVAL_INVALID/no", "APPROVAL_INVALID/no", "OK/no"}
	if len(got) != len(want) {
		t.Fatalf("records naming grant %s: %v, want %v", first.ID, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("records naming grant %s: %v, want %v", first.ID, got, want)
		}
	}
}

// testScope: the same intent in one scope is one operation (contract
// section 1), for any store, since the ids it gets are ScopeIDs'.
func testScope(t *testing.T, w *World) {
	args := `{"key":"a","value":"1"}`
	scoped := func(tool, scope, callID, grant string) *guard.Result {
		t.Helper()
		c := w.Call(alice, Req{Tool: tool, Args: args, CallID: callID})
		c.Context.Scope, c.Approval = scope, grant
		return w.DispatchCall(t, c)
	}
	first := scoped("put", "session-1", "c1", w.Grant(t, alice, "put", args))
	Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	// Repeated with new call ids and no grant: the first outcome, and no
	// human is asked (no APPROVAL_REQUIRED).
	for _, call := range []string{"c2", "c3"} {
		r := scoped("put", "session-1", call, "")
		Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(r.Data) != string(first.Data) {
			t.Fatalf("%s replayed %s, want %s", call, r.Data, first.Data)
		}
	}
	if n := w.Down.Writes(); n != 1 {
		t.Fatalf("%d side effects in one scope, want 1", n)
	}
	// The operation has ScopeIDs' id: a status query by it replays.
	op, _ := guard.ScopeIDs("session-1", guard.Fingerprint("put", []byte(args)))
	Want(t, w.Status(t, alice, op), guard.CodeOK, guard.DeliveryLocalReplay)
	// Another scope is another operation: asked again, and run again.
	Want(t, scoped("put", "session-2", "c4", ""), guard.CodeApprovalRequired, guard.DeliveryFresh)
	Want(t, scoped("put", "session-2", "c4", w.Grant(t, alice, "put", args)), guard.CodeOK, guard.DeliveryFresh)
	// A host's own key wins over the scope.
	c := w.Call(alice, Req{Tool: "put", Args: args, CallID: "c5", Key: "idem-5"})
	c.Context.Scope, c.Approval = "session-1", w.Grant(t, alice, "put", args)
	Want(t, w.DispatchCall(t, c), guard.CodeOK, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != 3 {
		t.Fatalf("%d side effects, want 3", n)
	}
	// A Repeatable tool's identical repeats are meant: each call runs.
	Want(t, scoped("append", "session-1", "c6", ""), guard.CodeOK, guard.DeliveryFresh)
	Want(t, scoped("append", "session-1", "c7", ""), guard.CodeOK, guard.DeliveryFresh)
	Want(t, scoped("append", "session-1", "c7", ""), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.Down.Writes(); n != 5 {
		t.Fatalf("%d side effects after two appends, want 5", n)
	}
}

// testStatusOwnOperation: a status query answers for the operation it
// names, or says NOT_FOUND; it never guesses (contract section 5).
func testStatusOwnOperation(t *testing.T, w *World) {
	approved := func(args, callID, key string, grant bool) *guard.Result {
		t.Helper()
		c := w.Call(alice, Req{Tool: "put", Args: args, CallID: callID, Key: key})
		if grant {
			c.Approval = w.Grant(t, alice, "put", args)
		}
		return w.DispatchCall(t, c)
	}
	a, b := `{"key":"a","value":"1"}`, `{"key":"b","value":"2"}`
	// c1 never started (no approval); c2 then takes its key for another
	// intent, c4 takes c3's for the same intent.
	Want(t, approved(a, "c1", "idem-1", false), guard.CodeApprovalRequired, guard.DeliveryFresh)
	Want(t, approved(b, "c2", "idem-1", true), guard.CodeOK, guard.DeliveryFresh)
	Want(t, approved(a, "c3", "idem-3", false), guard.CodeApprovalRequired, guard.DeliveryFresh)
	Want(t, approved(a, "c4", "idem-3", true), guard.CodeOK, guard.DeliveryFresh)
	for _, q := range []struct{ op, key string }{{"c1", "idem-1"}, {"c1", ""}, {"c3", "idem-3"}, {"c3", ""}} {
		s := w.StatusOf(t, alice, q.op, Req{Tool: "put", Key: q.key})
		Want(t, s, guard.CodeNotFound, guard.DeliveryFresh)
		if s.Data != nil {
			t.Fatalf("status of %s (key %q) carries data %s", q.op, q.key, s.Data)
		}
	}
	Want(t, w.StatusOf(t, alice, "c2", Req{Tool: "put", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
	// The same with an operation id of the host's, which no call binding
	// names: the key's record is c6's, not op-1's.
	c := w.Call(alice, Req{Tool: "put", Args: a, CallID: "c6", Key: "idem-6"})
	c.Context.OperationID = "op-1"
	Want(t, w.DispatchCall(t, c), guard.CodeApprovalRequired, guard.DeliveryFresh)
	Want(t, approved(b, "c7", "idem-6", true), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "op-1", Req{Tool: "put", Key: "idem-6"}), guard.CodeNotFound, guard.DeliveryFresh)
	// A write that did not start is NOT_FOUND too.
	w.Down.FailNext(guard.CodeTimeoutBeforeExecute, true)
	Want(t, approved(a, "c5", "idem-5", true), guard.CodeTimeoutBeforeExecute, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "c5", Req{Tool: "put", Key: "idem-5"}), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "c5", Req{Tool: "put"}), guard.CodeNotFound, guard.DeliveryFresh)

	// Operations the host named, without keys, that never started: the
	// store says so, so no receipt is asked under a guessed key.
	for i, fail := range []guard.Code{0, guard.CodeTimeoutBeforeExecute} {
		op := fmt.Sprintf("host-op-%d", i)
		c := w.Call(alice, Req{Tool: "put", Args: a, CallID: fmt.Sprintf("c-host-%d", i)})
		c.Context.OperationID = op
		want := guard.CodeApprovalRequired
		if fail != 0 {
			w.Down.FailNext(fail, true)
			c.Approval, want = w.Grant(t, alice, "put", a), fail
		}
		Want(t, w.DispatchCall(t, c), want, guard.DeliveryFresh)
		Want(t, w.StatusOf(t, alice, op, Req{Tool: "put"}), guard.CodeNotFound, guard.DeliveryFresh)
	}

	// A read: its stored result, or NOT_FOUND; never OUTCOME_UNKNOWN.
	Want(t, w.Dispatch(t, alice, Req{Tool: "get", Args: `{"key":"a"}`, CallID: "r1"}), guard.CodeOK, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "r1", Req{Tool: "get"}), guard.CodeOK, guard.DeliveryLocalReplay)
	Want(t, w.StatusOf(t, alice, "r-never", Req{Tool: "get"}), guard.CodeNotFound, guard.DeliveryFresh)
	Want(t, w.StatusOf(t, alice, "r-never", Req{Tool: "get", Key: "idem-r"}), guard.CodeNotFound, guard.DeliveryFresh)

	// Nothing stored of a write, asked with the key it ran under: the
	// receipt decides. Without its key, the guard can only guess the key:
	// no receipt under a guess proves nothing.
	Want(t, w.StatusOf(t, alice, "w-lost", Req{Tool: "put", Key: "idem-lost"}), guard.CodeNotFound, guard.DeliveryFresh)
	s := w.StatusOf(t, alice, "w-lost", Req{Tool: "put"})
	Want(t, s, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if s.OperationID != "w-lost" {
		t.Fatalf("operation id %q, want w-lost", s.OperationID)
	}
	if n := w.Down.Writes(); n != 3 {
		t.Fatalf("%d side effects, want 3", n)
	}
}
