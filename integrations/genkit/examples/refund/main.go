// Command refund is a Genkit generation whose tools run behind toolguard,
// offline: a scripted model stands in for Gemini, and the guard keeps its
// records in memory. The model reads an order and asks to draft a refund
// (a write that needs a human's approval: the generation is interrupted,
// and this program resumes it with the human's answer); the draft is made
// once, and when the model repeats the call, and when the user retries
// the whole request, it is replayed, not made again.
//
//	go run ./examples/refund             # from integrations/genkit: approve
//	go run ./examples/refund -approve=false
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/logger"
	"github.com/firebase/genkit/go/genkit"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

// shop holds the orders per tenant and the refund drafts made.
type shop struct {
	mu     sync.Mutex
	owners map[string]string // order -> tenant
	drafts map[string]string // downstream idempotency key -> draft id
}

// OrderIn is get_order's input.
type OrderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order\\, e.g. ORDER-7."` // which order
}

// RefundIn is create_refund_draft's input.
type RefundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`           // which order
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged,enum=not_received"` // why
}

// Order is get_order's output.
type Order struct {
	OrderRef string `json:"order_ref"` // which order
	Status   string `json:"status"`    // paid, shipped, …
}

// Draft is create_refund_draft's output.
type Draft struct {
	DraftID  string `json:"draft_id"`  // the shop's id of the draft
	OrderRef string `json:"order_ref"` // the order refunded
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
	approve := flag.Bool("approve", true, "the human's answer to the refund's approval")
	flag.Parse()
	logger.SetLevel(slog.LevelWarn) // Genkit's info logs out of the transcript
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
	gd, err := tggenkit.New(g, tools, tggenkit.Options{Signer: signer})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	gk := genkit.Init(ctx)
	model := genkit.DefineModelAction(gk, "shop/scripted", &ai.ModelOptions{Label: "scripted",
		Supports: &ai.ModelSupports{Tools: true, Multiturn: true, SystemRole: true}}, scripted)

	// The principal and the scope come from the host's session: here, Ada
	// of tenant acme, in her support session.
	ctx = tggenkit.WithScope(tggenkit.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "ada"}), "support-session-1")
	opts := []ai.GenerateOption{ai.WithModel(model), ai.WithUse(gd)}
	// A new request starts from the system prompt; a resume, from the
	// interrupted history, which has it already.
	start := append(opts, ai.WithSystem("You help customers with refunds."))

	ask := "I was charged twice for ORDER-7, please refund the duplicate."
	fmt.Println("user: " + ask)
	resp, err := genkit.Generate(ctx, gk, append(start, ai.WithPrompt(ask))...)
	if err != nil {
		return 0, err
	}
	transcript(resp.History())
	if as := tggenkit.Approvals(resp.Interrupts()...); len(as) > 0 {
		seen := len(resp.History())
		restarts := make([]*ai.Part, 0, len(as))
		for _, a := range as {
			fmt.Printf("human: approve %s %s for %s? -> %v\n", a.Request.Tool, a.Request.Arguments, a.Request.Principal.SubjectID, approve)
			r, err := tggenkit.Resume(a.Part, agentloop.Decision{Approved: approve, Approver: "manager-1"})
			if err != nil {
				return 0, err
			}
			restarts = append(restarts, r)
		}
		resp, err = genkit.Generate(ctx, gk, append(opts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restarts...))...)
		if err != nil {
			return 0, err
		}
		transcript(resp.History()[seen:])
	}

	fmt.Println("user (retrying the same request): " + ask)
	resp, err = genkit.Generate(ctx, gk, append(start, ai.WithPrompt(ask))...)
	if err != nil {
		return 0, err
	}
	transcript(resp.History())
	fmt.Printf("refund drafts created: %d\n", len(s.drafts))
	return len(s.drafts), nil
}

// transcript prints what happened in the messages: the model's calls and
// text, the guard's results, a pause for a human.
func transcript(msgs []*ai.Message) {
	for _, m := range msgs {
		for _, p := range m.Content {
			switch {
			case p.IsToolRequest():
				args, _ := json.Marshal(p.ToolRequest.Input)
				fmt.Printf("model calls %s %s\n", p.ToolRequest.Name, args)
				if p.IsInterrupt() {
					fmt.Println("  (the generation pauses for a human's approval)")
				}
			case p.IsToolResponse():
				res, err := tggenkit.ModelResult(p.ToolResponse.Output)
				if err != nil {
					fmt.Printf("  tool: %v\n", p.ToolResponse.Output)
					continue
				}
				fmt.Printf("  guard: %s\n", res)
			case p.IsText() && m.Role == ai.RoleModel:
				fmt.Println("model: " + p.Text)
			}
		}
	}
}

// scripted stands in for the model: it reads the order, drafts the refund,
// repeats the draft call once (as models do), and then answers. Like
// Gemini, it sends no refs; Genkit makes them up.
func scripted(_ context.Context, req *ai.ModelRequest, _ any, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	call := func(name string, input map[string]any) *ai.Message {
		return ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: name, Input: input}))
	}
	refund := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
	var msg *ai.Message
	last := req.Messages[len(req.Messages)-1]
	var tr *ai.ToolResponse
	for _, p := range last.Content {
		if p.IsToolResponse() {
			tr = p.ToolResponse
		}
	}
	if last.Role != ai.RoleTool || tr == nil {
		msg = call("get_order", map[string]any{"order_ref": "ORDER-7"})
	} else if res, err := tggenkit.ModelResult(tr.Output); err != nil {
		msg = ai.NewModelTextMessage("Something went wrong.")
	} else {
		switch {
		case tr.Name == "get_order" && res.Code == guard.CodeOK:
			msg = call("create_refund_draft", refund)
		case res.Code == guard.CodeOK && res.Delivery == guard.DeliveryFresh:
			msg = call("create_refund_draft", refund) // the model repeats itself
		case res.Code == guard.CodeOK:
			msg = ai.NewModelTextMessage("Your refund is drafted: " + string(res.Data) + ".")
		default:
			msg = ai.NewModelTextMessage("I could not draft the refund: " + res.Message)
		}
	}
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
}
