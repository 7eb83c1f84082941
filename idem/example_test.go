package idem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
)

// A store on any Redis (here an embedded one): a write runs once, its retry
// is replayed, and the tenant's audit chain verifies.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	store, err := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{Prefix: "myapp:"})
	if err != nil {
		panic(err)
	}
	svc := orders.NewService()
	signer, _ := guard.NewSigner([]byte("an approval key of 32 bytes or more"))
	g := guard.New(orders.Tools(svc), store, guard.Options{Signer: signer})

	user := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	refund := guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)}
	grant, _ := signer.Sign(guard.NewGrant(user, refund, "ann", guard.SystemClock.Now(), 5*time.Minute))
	for _, callID := range []string{"call-1", "call-2"} {
		res, _ := g.Dispatch(context.Background(), guard.Call{Principal: user, Proposal: refund, Approval: grant,
			Context: guard.ExecutionContext{CallID: callID, IdempotencyKey: "refund-ORDER-7"}})
		fmt.Println(callID, res.Code, res.Delivery, string(res.Data))
	}
	n, err := guard.VerifyAudit(context.Background(), store, user.TenantID)
	fmt.Println("drafts:", svc.SideEffects(), "audit records:", n, "chain ok:", err == nil)
	// Output:
	// call-1 OK fresh {"draft_id":"DRAFT-1","order_ref":"ORDER-7","reason":"duplicate"}
	// call-2 OK local_replay {"draft_id":"DRAFT-1","order_ref":"ORDER-7","reason":"duplicate"}
	// drafts: 1 audit records: 2 chain ok: true
}
