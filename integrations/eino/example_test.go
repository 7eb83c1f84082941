package tgeino_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/toolset"
)

// A compose graph whose ToolsNode runs through the guard: a refund that
// needs approval interrupts the run, the human's yes resumes it and the
// draft is made; the model asking again with a new call id replays it.
func Example() {
	ctx := context.Background()
	drafts := 0
	type refundIn struct {
		OrderRef string `json:"order_ref"`
	}
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order.",
		func(context.Context, *guard.Invocation, refundIn) (string, error) {
			drafts++
			return fmt.Sprintf("DRAFT-%d", drafts), nil
		}, &toolset.Options[refundIn, string]{NeedsApproval: true})
	set := toolset.MustNew(refund)
	signer, _ := guard.NewSigner([]byte("an example key of at least 32 bytes"))
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	eg, _ := tgeino.New(g, set, host.Options{Signer: signer})

	cfg := eg.ToolsNodeConfig()
	node, _ := compose.NewToolNode(ctx, &cfg)
	run, _ := compose.NewChain[*schema.Message, []*schema.Message]().AppendToolsNode(node).
		Compile(ctx, compose.WithCheckPointStore(newCheckpoints()))

	// The principal from the host's session, the run id as the scope.
	ctx = host.WithScope(host.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "user-1"}), "run-1")
	ask := func(callID string) *schema.Message {
		return schema.AssistantMessage("", []schema.ToolCall{{ID: callID, Type: "function",
			Function: schema.FunctionCall{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7"}`}}})
	}
	show := func(out []*schema.Message) {
		var r guard.Result
		_ = json.Unmarshal([]byte(out[0].Content), &r)
		fmt.Println(r.Code, r.Delivery, string(r.Data))
	}

	_, err := run.Invoke(ctx, ask("call_1"), compose.WithCheckPointID("run-1"))
	for _, a := range tgeino.ApprovalsOf(err) {
		fmt.Println("asking a human:", a.Request.Tool, string(a.Request.Arguments))
		ctx := tgeino.Resume(ctx, map[string]host.Decision{a.InterruptID: {Approved: true, Approver: "manager-1"}})
		out, _ := run.Invoke(ctx, ask("call_1"), compose.WithCheckPointID("run-1"))
		show(out)
	}
	out, _ := run.Invoke(ctx, ask("call_2"))
	show(out)
	fmt.Println("drafts:", drafts)
	// Output:
	// asking a human: create_refund_draft {"order_ref":"ORDER-7"}
	// OK fresh "DRAFT-1"
	// OK local_replay "DRAFT-1"
	// drafts: 1
}
