package tgadk_test

import (
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest/inboxtest"
	"github.com/toolguard/toolguard/internal/orders"
)

// TestInboxApprover: with approvals.Waiter as Options.Approver, the
// refund waits for a person in the approvals inbox instead of pausing the
// run: the request is there for the tenant, with the operation the grant
// pays for; another person's yes runs the write once, approved by them;
// their no is told to the model.
func TestInboxApprover(t *testing.T) {
	inbox := inboxtest.New(t, orders.Tools(orders.NewService()))
	w := newWorldWith(t, func(o *tgadk.Options) { o.Approver = inbox.Waiter })
	decide := func(approve bool) <-chan *approvals.Request {
		d := host.Decision{Approved: approve, Approver: "manager-3", Reason: "not this one"}
		return inboxtest.Decide(t, inbox.Queue, inboxtest.Manager("tenant-a", "manager-3"), d)
	}

	asked := decide(true)
	w.model.push(calls(refundCall("call-1", "ORDER-7")))
	evs := run(t, w.r, "user-1", "s1", genai.NewContentFromText("refund ORDER-7", genai.RoleUser))
	req := <-asked
	if confirmationCall(evs) != nil {
		t.Error("the run paused on ADK's confirmation although an Approver was set")
	}
	res := result(t, evs, "call-1")
	if res.Code != guard.CodeOK || w.svc.SideEffects() != 1 {
		t.Fatalf("approved in the inbox = %s with %d side effects, want OK and 1", res, w.svc.SideEffects())
	}
	if req == nil || req.Tool != "create_refund_draft" || req.RequestedBy != "user-1" || !strings.HasPrefix(req.OperationID, "op_") {
		t.Errorf("inbox request = %+v, want the refund asked by user-1, for its scope's operation", req)
	}
	recs, _, _ := w.store.Audit(t.Context(), "tenant-a", 0, 100)
	approved := false
	for _, r := range recs {
		approved = approved || (r.SideEffect == guard.SideEffectYes && strings.Contains(string(r.Body), `"approver":"manager-3"`))
	}
	if !approved {
		t.Error("the write's audit record does not name the inbox's approver")
	}

	asked = decide(false)
	w.model.push(calls(&genai.FunctionCall{ID: "call-2", Name: "create_refund_draft", Args: map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}}))
	evs = run(t, w.r, "user-1", "s1", genai.NewContentFromText("and for damage", genai.RoleUser))
	<-asked
	if res := result(t, evs, "call-2"); res.Code != guard.CodeApprovalRequired || !strings.Contains(res.Message, "not this one") {
		t.Errorf("denied in the inbox = %s, want APPROVAL_REQUIRED with the reason", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
}
