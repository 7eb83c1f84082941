package tgadk_test

import (
	"context"
	"fmt"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/toolset"
)

// An ADK agent whose refund tool runs behind the guard: the write pauses
// on ADK's confirmation, the user's yes runs it once, and the model asking
// again (Gemini gives the repeat no call id) replays the same draft.
func Example() {
	type RefundIn struct {
		OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	}
	drafts := 0
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order.",
		func(_ context.Context, inv *guard.Invocation, in RefundIn) (string, error) {
			drafts++
			return fmt.Sprintf("DRAFT-%d for %s", drafts, in.OrderRef), nil
		}, &toolset.Options[RefundIn, string]{NeedsApproval: true})
	tools := toolset.MustNew(refund)
	signer, _ := guard.NewSigner([]byte("an example key of at least 32 bytes"))
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	a, _ := tgadk.New(g, tools, tgadk.Options{Options: host.Options{Signer: signer,
		Principal: func(ctx context.Context) (guard.Principal, error) { // the host's session, not the model
			actx, ok := ctx.(agent.Context) // the ADK context of the tool call
			if !ok {
				return guard.Principal{}, host.ErrNoPrincipal
			}
			return guard.Principal{TenantID: "acme", SubjectID: actx.UserID()}, nil
		}}})

	m := &fakeModel{}
	ask := func(id string) *genai.Content {
		return calls(&genai.FunctionCall{ID: id, Name: "create_refund_draft", Args: map[string]any{"order_ref": "ORDER-7"}})
	}
	m.push(ask("call-1"))
	ag, _ := llmagent.New(llmagent.Config{Name: "refunds", Model: m, Tools: a.Tools()})
	p, _ := a.Plugin()
	r, _ := runner.New(runner.Config{AppName: "shop", Agent: ag, SessionService: session.InMemoryService(),
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}}})

	turn := func(msg *genai.Content) (confirmation *genai.FunctionCall) {
		for ev, err := range r.Run(context.Background(), "ada", "session-1", msg, agent.RunConfig{}) {
			if err != nil {
				fmt.Println("error:", err)
				return nil
			}
			if ev.Content == nil {
				continue
			}
			for _, part := range ev.Content.Parts {
				switch {
				case part.FunctionCall != nil && part.FunctionCall.Name == "adk_request_confirmation":
					confirmation = part.FunctionCall
					fmt.Println("paused: a human is asked")
				case part.FunctionResponse != nil:
					res, _ := host.ModelResult(part.FunctionResponse.Response)
					if res.Code != guard.CodeOK {
						fmt.Println(res.Code, res.Message)
						continue
					}
					fmt.Println(res.Code, res.Delivery, string(res.Data))
				}
			}
		}
		return confirmation
	}
	c := turn(genai.NewContentFromText("refund my duplicate order ORDER-7", genai.RoleUser))
	turn(confirm(c, true)) // the user says yes
	m.push(ask(""))
	turn(genai.NewContentFromText("did you refund it?", genai.RoleUser))
	fmt.Println("drafts created:", drafts)
	// Output:
	// APPROVAL_REQUIRED A human has been asked to approve this action; the run continues once they decide.
	// paused: a human is asked
	// OK fresh "DRAFT-1 for ORDER-7"
	// OK local_replay "DRAFT-1 for ORDER-7"
	// drafts created: 1
}
