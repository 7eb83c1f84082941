// Package inboxtest is the approvals inbox of the framework integrations'
// tests (see frameworktest): a queue on an embedded Redis, and a manager
// who decides the one request that reaches it.
package inboxtest

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// Queue returns an approvals queue for tools on a fresh miniredis, both
// closed when the test ends.
func Queue(t testing.TB, tools *toolset.Set) *approvals.Queue {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := approvals.NewQueue(rdb, approvals.Options{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Wait is how long Decide waits for a request to reach the inbox, and a
// Waiter of Inbox for a decision.
const Wait = 10 * time.Second

// Inbox is an approvals queue and the Waiter that puts an integration's
// writes to it (Options.Approver).
type Inbox struct {
	Queue  *approvals.Queue
	Waiter *approvals.Waiter
}

// New returns an Inbox for tools on a fresh miniredis (Queue); its
// Waiter polls every 5 ms and waits up to Wait.
func New(t testing.TB, tools *toolset.Set) *Inbox {
	t.Helper()
	q := Queue(t, tools)
	return &Inbox{Queue: q, Waiter: &approvals.Waiter{Queue: q, Poll: 5 * time.Millisecond, Wait: Wait}}
}

// Manager returns a principal of the tenant with the approver role.
func Manager(tenantID, subjectID string) guard.Principal {
	return guard.Principal{TenantID: tenantID, SubjectID: subjectID, Roles: []string{"approver"}}
}

// Decide waits in the background for the inbox of approver's tenant to
// hold exactly one pending request, decides it as approver with d, and
// sends the request as decided on the channel, which it closes after. A
// failed decision, or no request within Wait, is a test error and closes
// the channel with nothing sent.
func Decide(t testing.TB, q *approvals.Queue, approver guard.Principal, d host.Decision) <-chan *approvals.Request {
	ctx := t.Context()
	done := make(chan *approvals.Request, 1)
	go func() {
		defer close(done)
		for deadline := time.Now().Add(Wait); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
			pending, err := q.Pending(ctx, approver.TenantID, 10)
			if err != nil || len(pending) != 1 {
				continue
			}
			r, err := q.Decide(ctx, approver, pending[0].ID, d, false)
			if err != nil {
				t.Errorf("decide: %v", err)
				return
			}
			done <- r
			return
		}
		if ctx.Err() == nil { // not after the test ended
			t.Error("no request reached the inbox")
		}
	}()
	return done
}
