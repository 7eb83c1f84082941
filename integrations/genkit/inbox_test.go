package tggenkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/firebase/genkit/go/ai"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/orders"
)

// With Options.Approver an approvals.Waiter, a generation's write waits in
// the approvals inbox instead of interrupting the generation: the request
// shows the exact intent and scope, an approver of the tenant decides it,
// and the write runs once with the grant minted from that yes.
func TestApprovalsInboxHoldsRequests(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	queue, err := approvals.NewQueue(rdb, approvals.Options{Tools: orders.Tools(orders.NewService())})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, func(o *tggenkit.Options) { o.Approver = &approvals.Waiter{Queue: queue, Poll: 5 * time.Millisecond} })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	decided := make(chan *approvals.Request, 1)
	go func() {
		defer close(decided)
		for ctx.Err() == nil {
			reqs, err := queue.Pending(ctx, "tenant-a", 10)
			if err == nil && len(reqs) == 1 {
				manager := guard.Principal{TenantID: "tenant-a", SubjectID: "manager-1", Roles: []string{"approver"}}
				if r, err := queue.Decide(ctx, manager, reqs[0].ID, agentloop.Decision{Approved: true}, false); err == nil {
					decided <- r
				}
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	w.model.push(calls(refundReq("call-1", "ORDER-7")))
	out, err := generate(tggenkit.WithScope(tggenkit.WithPrincipal(ctx, userA), "session-inbox"), w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
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
