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
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/logger"
	"github.com/firebase/genkit/go/genkit"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/refunddemo"
)

func main() {
	logger.SetLevel(slog.LevelWarn) // Genkit's info logs out of the transcript
	refunddemo.Main(run)
}

// run runs the conversation with the human's answer and returns the
// number of refund drafts the shop made.
func run(approve bool) (int, error) {
	ctx := context.Background()
	gk := genkit.Init(ctx)
	model := genkit.DefineModelAction(gk, "shop/scripted", &ai.ModelOptions{Label: "scripted",
		Supports: &ai.ModelSupports{Tools: true, Multiturn: true, SystemRole: true}}, scripted)
	s := refunddemo.NewShop(os.Stdout)
	g, tools, signer := s.Guard()
	gd, err := tggenkit.New(g, tools, host.Options{Signer: signer})
	if err != nil {
		return 0, err
	}

	// The principal and the scope come from the host's session: here, Ada
	// of tenant acme, in her support session.
	ctx = host.WithScope(host.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "ada"}), "support-session-1")
	opts := []ai.GenerateOption{ai.WithModel(model), ai.WithUse(gd)}
	// A new request starts from the system prompt; a resume, from the
	// interrupted history, which has it already.
	start := append(opts, ai.WithSystem(refunddemo.Instruction))

	ask := refunddemo.Ask
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
			r, err := tggenkit.Resume(a.Part, host.Decision{Approved: approve, Approver: "manager-1"})
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
	fmt.Printf("refund drafts created: %d\n", s.Drafts())
	return s.Drafts(), nil
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
				res, err := host.ModelResult(p.ToolResponse.Output)
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

// scripted stands in for the model, playing refunddemo's script on the
// conversation's last turn. Like Gemini, it sends no refs; Genkit makes
// them up.
func scripted(_ context.Context, req *ai.ModelRequest, _ any, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	var tr *ai.ToolResponse
	for _, p := range last.Content {
		if p.IsToolResponse() {
			tr = p.ToolResponse
		}
	}
	var r refunddemo.Reply
	if last.Role != ai.RoleTool || tr == nil {
		r = refunddemo.Next("", nil, nil)
	} else {
		res, err := host.ModelResult(tr.Output)
		r = refunddemo.Next(tr.Name, res, err)
	}
	msg := ai.NewModelTextMessage(r.Text)
	if r.Tool != "" {
		msg = ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: r.Tool, Input: r.Arguments}))
	}
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
}
