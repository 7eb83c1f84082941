package agentloop_test

import (
	"context"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

// Example runs a scripted model offline: it reads an order, drafts a refund
// that a human approves, and asks for the same refund again with its keys
// in another order. The draft is created once; the repeat is a replay.
func Example() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Text: "ORDER-7 is paid; drafting the refund.", Calls: []fakemodel.Call{
			{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "create_refund_draft", Arguments: `{"reason":"duplicate","order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Text: "Refund draft DRAFT-1 is created."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))

	svc := orders.NewService()
	approve := host.ApproverFunc(func(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
		return host.Decision{Approved: true, Approver: "ann"}, nil
	})
	// Without Options.Store the loop keeps its records in an embedded Redis.
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), orders.Tools(svc), agentloop.Options{Approver: approve})

	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"} // from the host's session
	res, err := loop.Run(context.Background(), principal, "Please refund my duplicate order ORDER-7.")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Print(res.Transcript)
	fmt.Printf("status %s after %d turns; %d draft created\n", res.Status, res.Turns, svc.SideEffects())
	// Output:
	// user:      Please refund my duplicate order ORDER-7.
	// model:     calls get_order {"order_ref":"ORDER-7"}
	// guard:     get_order OK (delivery fresh, recovery none) {"order_ref":"ORDER-7","status":"paid"}
	// assistant: ORDER-7 is paid; drafting the refund.
	// model:     calls create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"}
	// approval:  create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"} needs a human's yes
	// approval:  create_refund_draft approved by ann
	// guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1","order_ref":"ORDER-7","reason":"duplicate"}
	// model:     calls create_refund_draft {"reason":"duplicate","order_ref":"ORDER-7"}
	// guard:     create_refund_draft OK (delivery local_replay, recovery none) {"draft_id":"DRAFT-1","order_ref":"ORDER-7","reason":"duplicate"}
	// assistant: Refund draft DRAFT-1 is created.
	// status completed after 4 turns; 1 draft created
}

// ExampleLoop_Resume pauses a run at a write that needs approval, saves its
// state, and resumes it once a human said yes.
func ExampleLoop_Resume() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "create_refund_draft", Arguments: `{"reason":"damaged","order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Text: "The refund draft is created."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))
	svc := orders.NewService()
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), orders.Tools(svc), agentloop.Options{}) // no Approver: the run pauses
	ctx := context.Background()
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}

	res, err := loop.Run(ctx, principal, "ORDER-7 arrived damaged.")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, req := range res.Pending {
		fmt.Printf("%s: %s %s for %s\n", res.Status, req.Tool, req.Arguments, req.Principal.SubjectID)
	}
	saved, _ := res.State.Marshal() // kept by the host until the human answers

	st, err := agentloop.LoadState(saved)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	grant, err := loop.Grant(st.Pending[0], "ann")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	res, err = loop.Resume(ctx, principal, st, agentloop.Approval{CallID: st.Pending[0].CallID, Grant: grant})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Print(res.Transcript)
	fmt.Printf("%s after %d turns; %d draft created\n", res.Status, res.Turns, svc.SideEffects())
	// Output:
	// paused: create_refund_draft {"order_ref":"ORDER-7","reason":"damaged"} for user-1
	// user:      ORDER-7 arrived damaged.
	// model:     calls create_refund_draft {"reason":"damaged","order_ref":"ORDER-7"}
	// approval:  create_refund_draft {"order_ref":"ORDER-7","reason":"damaged"} needs a human's yes
	// approval:  create_refund_draft approved by grant
	// guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1","order_ref":"ORDER-7","reason":"damaged"}
	// assistant: The refund draft is created.
	// completed after 2 turns; 1 draft created
}

// ExampleLoop_Stream runs an agent on Anthropic Messages (a fake server
// here) and prints its events as they happen: the model's text in the
// deltas it streams, each call and result, and the end.
func ExampleLoop_Stream() {
	srv := fakemodel.NewAnthropic(
		fakemodel.Turn{Text: "Checking the order.", Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Text: "ORDER-7 is paid."},
	)
	defer srv.Close()
	client := anthropic.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey("test"))
	loop := agentloop.New(tganthropic.NewModel(client, tganthropic.ModelOptions{}), orders.Tools(orders.NewService()), agentloop.Options{})

	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	for e, err := range loop.Stream(context.Background(), principal, "Is ORDER-7 paid?") {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch e.Kind {
		case agentloop.EventText:
			fmt.Printf("delta %q\n", e.Text)
		case agentloop.EventCall, agentloop.EventResult, agentloop.EventEnd:
			fmt.Println(e)
		}
	}
	// Output:
	// delta "Checking "
	// delta "the "
	// delta "order."
	// model:     calls get_order {"order_ref":"ORDER-7"}
	// guard:     get_order OK (delivery fresh, recovery none) {"order_ref":"ORDER-7","status":"paid"}
	// delta "ORDER-7 "
	// delta "is "
	// delta "paid."
	// end:       completed
}

// ExampleNewApprovalRequest is the approval step of a host that drives the
// calls itself: the guard asks for a human, the human sees the canonical
// intent, and the yes becomes a grant that runs the call once.
func ExampleNewApprovalRequest() {
	signer, _ := guard.NewSigner([]byte("an example key of 32 bytes......"))
	g := guard.New(orders.Tools(orders.NewService()), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	ctx := context.Background()
	call := guard.Call{
		Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"},
		Proposal:  guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"reason":"duplicate","order_ref":"ORDER-7"}`)},
		Context:   guard.ExecutionContext{CallID: "call-1", Scope: "session-1"},
	}
	res, _ := g.Dispatch(ctx, call)
	fmt.Println(res.Code, host.NeedsApproval(g, call, res))

	req := host.NewApprovalRequest(g, call)
	fmt.Println(req.Tool, string(req.Arguments))

	call.Approval, _ = host.SignGrant(signer, nil, 0, req, "ann")
	res, _ = g.Dispatch(ctx, call)
	fmt.Println(res.Code)
	// Output:
	// APPROVAL_REQUIRED true
	// create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"}
	// OK
}
