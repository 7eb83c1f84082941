package tgeino_test

import (
	"testing"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/frameworktest/inboxtest"
	"github.com/toolguard/toolguard/toolset"
)

// With Options.Approver an approvals.Waiter, an Eino run's write waits in
// the approvals inbox instead of interrupting the run: the request shows
// the exact intent and run, an approver of the tenant decides it, and the
// write runs once with the grant minted from that yes.
func TestApprovalsInboxHoldsRequests(t *testing.T) {
	var inbox *inboxtest.Inbox
	m := newScript(callTool("create_refund_draft", refundArgs), say("refund drafted"))
	h := newHarnessWith(t, m, harnessOpts{approval: true, options: func(set *toolset.Set, o *host.Options) {
		inbox = inboxtest.New(t, set)
		o.Approver = inbox.Waiter
	}})
	decided := inboxtest.Decide(t, inbox.Queue, inboxtest.Manager("acme", "manager-1"), host.Decision{Approved: true})
	if o := h.run(t, "run-inbox", "refund ORDER-7"); o.final != "refund drafted" || len(o.interrupts) != 0 {
		t.Fatalf("run ended %+v", o)
	}
	r := <-decided
	if r == nil || r.RunID != "run-inbox" || r.Tool != "create_refund_draft" || r.RequestedBy != "user-1" || r.Status != approvals.StatusApproved {
		t.Fatalf("inbox request %+v", r)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh")
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}
