// Command refund is an ADK agent whose tools run behind toolguard, offline:
// a scripted model stands in for Gemini, and the guard keeps its records in
// memory. The agent reads an order, asks to draft a refund (a write that
// needs a human's approval: the run pauses on ADK's confirmation, and this
// program answers it), drafts it once, and when the model repeats the call,
// and when the user retries the whole turn, the draft is replayed, not made
// again.
//
//	go run ./examples/refund             # from integrations/adk: approve
//	go run ./examples/refund -approve=false
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"sync"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

// The shop: orders per tenant, and the refund drafts made.
type shop struct {
	mu     sync.Mutex
	owners map[string]string // order -> tenant
	drafts map[string]string // downstream idempotency key -> draft id
}

type OrderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order\\, e.g. ORDER-7."`
}

type RefundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged,enum=not_received"`
}

type Order struct {
	OrderRef string `json:"order_ref"`
	Status   string `json:"status"`
}

type Draft struct {
	DraftID  string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
}

func (s *shop) owns(_ context.Context, inv *guard.Invocation, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[ref] != inv.Principal.TenantID {
		return guard.ErrNotFound // another tenant's order does not exist for this one
	}
	return nil
}

func (s *shop) tools() *toolset.Set {
	get := toolset.Read("get_order", "Look up one of the customer's orders.",
		func(_ context.Context, _ *guard.Invocation, in OrderIn) (Order, error) {
			return Order{OrderRef: in.OrderRef, Status: "paid"}, nil
		}, &toolset.Options[OrderIn, Order]{Authorize: func(ctx context.Context, inv *guard.Invocation, in OrderIn) error {
			return s.owns(ctx, inv, in.OrderRef)
		}})
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order; a human approves it first.",
		func(_ context.Context, inv *guard.Invocation, in RefundIn) (Draft, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if id, ok := s.drafts[inv.IdempotencyKey]; ok { // the downstream system dedupes by the key too
				return Draft{DraftID: id, OrderRef: in.OrderRef}, nil
			}
			id := fmt.Sprintf("DRAFT-%d", len(s.drafts)+1)
			s.drafts[inv.IdempotencyKey] = id
			fmt.Printf("  shop: drafted %s for %s (%s)\n", id, in.OrderRef, in.Reason)
			return Draft{DraftID: id, OrderRef: in.OrderRef}, nil
		}, &toolset.Options[RefundIn, Draft]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"},
			Authorize: func(ctx context.Context, inv *guard.Invocation, in RefundIn) error {
				return s.owns(ctx, inv, in.OrderRef)
			}})
	return toolset.MustNew(get, refund)
}

func main() {
	approve := flag.Bool("approve", true, "the human's answer to the refund's confirmation")
	flag.Parse()
	if _, err := run(*approve); err != nil {
		fmt.Fprintln(os.Stderr, "refund:", err)
		os.Exit(1)
	}
}

// run runs the conversation with the human's answer and returns the
// number of refund drafts the shop made.
func run(approve bool) (int, error) {
	s := &shop{owners: map[string]string{"ORDER-7": "acme", "ORDER-9": "globex"}, drafts: map[string]string{}}
	tools := s.tools()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := guard.NewSigner(key)
	if err != nil {
		return 0, err
	}
	g := guard.New(tools, memstore.New(memstore.Options{}), guard.Options{Signer: signer})
	a, err := tgadk.New(g, tools, tgadk.Options{Signer: signer,
		// The principal comes from the host's session: here, ADK's user id.
		Principal: func(ctx agent.Context) (guard.Principal, error) {
			if ctx.UserID() != "ada" {
				return guard.Principal{}, errors.New("unknown user")
			}
			return guard.Principal{TenantID: "acme", SubjectID: "ada"}, nil
		}})
	if err != nil {
		return 0, err
	}
	ag, err := llmagent.New(llmagent.Config{Name: "support", Model: scripted{}, Tools: a.Tools(),
		Instruction: "You help customers with refunds."})
	if err != nil {
		return 0, err
	}
	p, err := a.Plugin()
	if err != nil {
		return 0, err
	}
	r, err := runner.New(runner.Config{AppName: "shop", Agent: ag, SessionService: session.InMemoryService(),
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}}})
	if err != nil {
		return 0, err
	}

	ctx := context.Background()
	ask := genai.NewContentFromText("I was charged twice for ORDER-7, please refund the duplicate.", genai.RoleUser)
	fmt.Println("user: " + ask.Parts[0].Text)
	c, err := turn(ctx, r, ask)
	if err != nil {
		return 0, err
	}
	if c != nil {
		fmt.Printf("human: %s -> %v\n", c.hint, approve)
		answer := &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
			ID: c.id, Name: "adk_request_confirmation", Response: map[string]any{"confirmed": approve}}}}}
		if _, err := turn(ctx, r, answer); err != nil {
			return 0, err
		}
	}
	fmt.Println("user (retrying the same request): " + ask.Parts[0].Text)
	if _, err := turn(ctx, r, ask); err != nil {
		return 0, err
	}
	fmt.Printf("refund drafts created: %d\n", len(s.drafts))
	return len(s.drafts), nil
}

// confirmation is the adk_request_confirmation call a run paused on.
type confirmation struct{ id, hint string }

// turn runs one user turn and prints what happened: the model's calls, the
// guard's results, a pause, the model's text.
func turn(ctx context.Context, r *runner.Runner, msg *genai.Content) (*confirmation, error) {
	var paused *confirmation
	for ev, err := range r.Run(ctx, "ada", "session-1", msg, agent.RunConfig{}) {
		if err != nil {
			return nil, err
		}
		if ev.Content == nil {
			continue
		}
		for _, part := range ev.Content.Parts {
			switch {
			case part.FunctionCall != nil && part.FunctionCall.Name == "adk_request_confirmation":
				paused = &confirmation{id: part.FunctionCall.ID, hint: hintOf(part.FunctionCall.Args["toolConfirmation"])}
				fmt.Println("  (the run pauses for a human's approval)")
			case part.FunctionCall != nil:
				fmt.Printf("model calls %s %v\n", part.FunctionCall.Name, part.FunctionCall.Args)
			case part.FunctionResponse != nil:
				res, err := tgadk.ModelResult(part.FunctionResponse.Response)
				if err != nil {
					return nil, err
				}
				fmt.Printf("  guard: %s\n", res)
			case part.Text != "":
				fmt.Println("model: " + part.Text)
			}
		}
	}
	return paused, nil
}

// hintOf reads the hint of a confirmation request's toolConfirmation, as
// the session keeps it (in memory: the value; from JSON: a map).
func hintOf(tc any) string {
	switch tc := tc.(type) {
	case toolconfirmation.ToolConfirmation:
		return tc.Hint
	case *toolconfirmation.ToolConfirmation:
		return tc.Hint
	case map[string]any:
		if h, ok := tc["hint"].(string); ok {
			return h
		}
	}
	return fmt.Sprint(tc)
}

// scripted stands in for the model: it reads the order, drafts the refund,
// repeats the draft call once (as models do), and then answers. Like
// Gemini, it sends no call ids; ADK makes them up.
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: next(req.Contents), TurnComplete: true}, nil)
	}
}

// next decides the model's reply from the conversation's last turn.
func next(contents []*genai.Content) *genai.Content {
	call := func(name string, args map[string]any) *genai.Content {
		return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: name, Args: args}}}}
	}
	refund := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
	last := contents[len(contents)-1]
	var fr *genai.FunctionResponse
	for _, p := range last.Parts {
		if p.FunctionResponse != nil {
			fr = p.FunctionResponse
		}
	}
	if fr == nil {
		return call("get_order", map[string]any{"order_ref": "ORDER-7"})
	}
	res, err := tgadk.ModelResult(fr.Response)
	switch {
	case err != nil:
		return genai.NewContentFromText("Something went wrong.", genai.RoleModel)
	case fr.Name == "get_order":
		return call("create_refund_draft", refund)
	case res.Code == guard.CodeOK && res.Delivery == guard.DeliveryFresh:
		return call("create_refund_draft", refund) // the model repeats itself
	case res.Code == guard.CodeOK:
		return genai.NewContentFromText("Your refund is drafted: "+string(res.Data)+".", genai.RoleModel)
	default:
		return genai.NewContentFromText("I could not draft the refund: "+res.Message, genai.RoleModel)
	}
}
