package tggenkit_test

import (
	"context"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/toolset"
)

// A Genkit generation whose refund tool runs behind the guard: the write
// interrupts the generation for a human, the resume with a yes runs it
// once, and the model asking again later in the session (with no ref)
// gets the same draft replayed.
func Example() {
	type RefundIn struct {
		OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	}
	drafts := 0
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order.",
		func(_ context.Context, _ *guard.Invocation, in RefundIn) (string, error) {
			drafts++
			return fmt.Sprintf("DRAFT-%d for %s", drafts, in.OrderRef), nil
		}, &toolset.Options[RefundIn, string]{NeedsApproval: true})
	tools := toolset.MustNew(refund)
	signer, _ := guard.NewSigner([]byte("an example key of at least 32 bytes"))
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	gd, _ := tggenkit.New(g, tools, host.Options{Signer: signer})

	ctx := context.Background()
	gk := genkit.Init(ctx)
	// A scripted model: asked by the user, it calls the tool; given the
	// tool's answer, it replies.
	model := genkit.DefineModelAction(gk, "example/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(_ context.Context, req *ai.ModelRequest, _ any, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			msg := ai.NewModelTextMessage("Your refund is drafted.")
			if req.Messages[len(req.Messages)-1].Role == ai.RoleUser {
				msg = ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: "create_refund_draft",
					Input: map[string]any{"order_ref": "ORDER-7"}}))
			}
			return &ai.ModelResponse{Request: req, Message: msg}, nil
		})

	// The principal and the scope come from the host's session, not the model.
	ctx = host.WithScope(host.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "ada"}), "session-1")
	opts := []ai.GenerateOption{ai.WithModel(model), ai.WithUse(gd)}
	show := func(resp *ai.ModelResponse) {
		h := resp.History()
		for _, p := range h[len(h)-2].Content { // the last tool message
			if p.IsToolResponse() {
				res, _ := host.ModelResult(p.ToolResponse.Output)
				fmt.Println(res.Code, res.Delivery, string(res.Data))
			}
		}
		fmt.Println("model:", resp.Text())
	}

	resp, _ := genkit.Generate(ctx, gk, append(opts, ai.WithPrompt("refund my duplicate order ORDER-7"))...)
	fmt.Println(resp.FinishReason)
	a := tggenkit.Approvals(resp.Interrupts()...)[0]
	fmt.Println("a human is asked:", a.Request.Tool, string(a.Request.Arguments))
	restart, _ := tggenkit.Resume(a.Part, host.Decision{Approved: true, Approver: "manager"})
	resp, _ = genkit.Generate(ctx, gk, append(opts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))...)
	show(resp)
	resp, _ = genkit.Generate(ctx, gk, append(opts, ai.WithPrompt("did you refund ORDER-7?"))...)
	show(resp)
	fmt.Println("drafts created:", drafts)
	// Output:
	// interrupted
	// a human is asked: create_refund_draft {"order_ref":"ORDER-7"}
	// OK fresh "DRAFT-1 for ORDER-7"
	// model: Your refund is drafted.
	// OK local_replay "DRAFT-1 for ORDER-7"
	// model: Your refund is drafted.
	// drafts created: 1
}
