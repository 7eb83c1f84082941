package host_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/orders"
)

// A framework's tool call through the host step: the write waits for a
// human, the framework pauses its run, and the resume decides it. Deciding
// the same call again replays instead of refunding twice.
func ExampleHost_Answer() {
	signer, _ := guard.NewSigner([]byte(strings.Repeat("s", 32)))
	svc := orders.NewService()
	tools := orders.Tools(svc)
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	h, _ := host.New(g, tools, host.Options{Provider: "myframework", Signer: signer})

	// The host puts who and where on the context; the model names neither.
	ctx := host.WithScope(host.WithPrincipal(context.Background(),
		guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}), "session-1")
	call, _ := h.Call(ctx, host.Frame{Name: "create_refund_draft",
		Arguments: []byte(`{"reason":"duplicate","order_ref":"ORDER-7"}`), CallID: "call-1"})

	a, _ := h.Answer(ctx, call)
	fmt.Println("ask a human:", a.Ask.Tool, string(a.Ask.Arguments))
	pending := host.PendingOf(*a.Ask) // what the framework keeps while paused

	for range 2 {
		res, _ := h.Decide(ctx, call, pending, host.Decision{Approved: true, Approver: "lead"})
		fmt.Println(res.Code, res.Delivery)
	}
	fmt.Println("refund drafts:", svc.SideEffects())
	// Output:
	// ask a human: create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"}
	// OK fresh
	// OK local_replay
	// refund drafts: 1
}
