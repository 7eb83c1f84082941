package tggenkit_test

import (
	"context"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/frameworktest/inboxtest"
	"github.com/toolguard/toolguard/internal/orders"
)

// With Options.Approver an approvals.Waiter, a generation's write waits in
// the approvals inbox instead of interrupting the generation: the request
// shows the exact intent and scope, an approver of the tenant decides it,
// and the write runs once with the grant minted from that yes.
func TestApprovalsInboxHoldsRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(session(userA, "session-inbox"), inboxtest.Wait)
	defer cancel()
	inbox := inboxtest.New(t, orders.Tools(orders.NewService()))
	w := newWorld(t, func(o *host.Options) { o.Approver = inbox.Waiter })
	w.model.push(calls(refundReq("call-1", "ORDER-7")))
	decided := inboxtest.Decide(t, inbox.Queue, inboxtest.Manager("tenant-a", "manager-1"), host.Decision{Approved: true})
	out, err := generate(ctx, w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
	if err != nil {
		t.Fatal(err)
	}
	if out.FinishReason == ai.FinishReasonInterrupted || out.Text() != "done" {
		t.Fatalf("generation ended %q (%s), want it to finish", out.FinishReason, out.Text())
	}
	r := <-decided
	if r == nil || r.RunID != "session-inbox" || r.Tool != "create_refund_draft" || r.RequestedBy != "user-1" || r.Status != approvals.StatusApproved {
		t.Fatalf("inbox request %+v", r)
	}
	if res := result(t, out.History(), "call-1"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Errorf("approved call = %s, want OK fresh", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}
