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
	"errors"
	"fmt"
	"iter"
	"os"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/refunddemo"
)

func main() { refunddemo.Main(run) }

// run runs the conversation with the human's answer and returns the
// number of refund drafts the shop made.
func run(approve bool) (int, error) {
	s := refunddemo.NewShop(os.Stdout)
	g, tools, signer := s.Guard()
	a, err := tgadk.New(g, tools, tgadk.Options{Options: host.Options{Signer: signer,
		// The principal comes from the host's session: here, ADK's user id
		// (ctx is the ADK context of the tool call).
		Principal: func(ctx context.Context) (guard.Principal, error) {
			if actx, ok := ctx.(agent.Context); !ok || actx.UserID() != "ada" {
				return guard.Principal{}, errors.New("unknown user")
			}
			return guard.Principal{TenantID: "acme", SubjectID: "ada"}, nil
		}}})
	if err != nil {
		return 0, err
	}
	ag, err := llmagent.New(llmagent.Config{Name: "support", Model: scripted{}, Tools: a.Tools(),
		Instruction: refunddemo.Instruction})
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
	ask := genai.NewContentFromText(refunddemo.Ask, genai.RoleUser)
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
	fmt.Printf("refund drafts created: %d\n", s.Drafts())
	return s.Drafts(), nil
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
				res, err := host.ModelResult(part.FunctionResponse.Response)
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

// scripted stands in for the model, playing refunddemo's script. Like
// Gemini, it sends no call ids; ADK makes them up.
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: next(req.Contents), TurnComplete: true}, nil)
	}
}

// next plays the script (refunddemo.Next) on the conversation's last
// turn.
func next(contents []*genai.Content) *genai.Content {
	var fr *genai.FunctionResponse
	for _, p := range contents[len(contents)-1].Parts {
		if p.FunctionResponse != nil {
			fr = p.FunctionResponse
		}
	}
	var r refunddemo.Reply
	if fr == nil {
		r = refunddemo.Next("", nil, nil)
	} else {
		res, err := host.ModelResult(fr.Response)
		r = refunddemo.Next(fr.Name, res, err)
	}
	if r.Tool == "" {
		return genai.NewContentFromText(r.Text, genai.RoleModel)
	}
	return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: r.Tool, Args: r.Arguments}}}}
}
