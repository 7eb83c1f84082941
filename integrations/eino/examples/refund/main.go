// Command refund is toolguard inside CloudWeGo Eino, offline: an adk
// ChatModelAgent, run by an adk Runner with a checkpoint store, whose model
// (a scripted fake: no API key, no network) reads the user's order, drafts
// a refund, which a human must approve, and then asks for the same refund
// again, as models do. The run is interrupted for the approval, resumed
// with the human's decision, and the draft is created once.
//
//	go run ./examples/refund                 (from integrations/eino)
//	go run ./examples/refund -approve=false  (the human says no: nothing is drafted)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/refunddemo"
)

// out is where the transcript goes.
var out io.Writer = os.Stdout

func main() { refunddemo.Main(run) }

// run runs the conversation with the human's answer and returns the
// number of refund drafts the shop made.
func run(approve bool) (int, error) {
	ctx := context.Background()
	sh := refunddemo.NewShop(out)
	g, set, signer := sh.Guard()
	eg, err := tgeino.New(g, set, host.Options{Signer: signer})
	if err != nil {
		return 0, err
	}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "refunds",
		Description: "Refunds duplicate orders.",
		Instruction: refunddemo.Instruction,
		Model:       &fakeModel{},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: eg.ToolsNodeConfig()},
	})
	if err != nil {
		return 0, err
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: &checkpoints{m: map[string][]byte{}}})

	// The principal comes from the host's session, never from the model;
	// the run id is the scope, the same on resume.
	const runID = "run-refund-1"
	ctx = host.WithScope(host.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "user-1"}), runID)
	input := refunddemo.Ask
	fmt.Fprintln(out, "user:", input)
	pending, err := show(runner.Query(ctx, input, adk.WithCheckPointID(runID)))
	if err != nil {
		return 0, err
	}
	for len(pending) > 0 {
		targets := map[string]any{}
		for _, a := range pending {
			fmt.Fprintf(out, "human: asked to approve %s %s for %s/%s: ", a.Request.Tool, a.Request.Arguments,
				a.Request.Principal.TenantID, a.Request.Principal.SubjectID)
			d := host.Decision{Approved: approve, Approver: "manager-1"}
			if approve {
				fmt.Fprintln(out, "approved")
			} else {
				d.Reason = "not a duplicate"
				fmt.Fprintln(out, "denied")
			}
			targets[a.InterruptID] = d
		}
		it, err := runner.ResumeWithParams(ctx, runID, &adk.ResumeParams{Targets: targets})
		if err != nil {
			return 0, err
		}
		if pending, err = show(it); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(out, "drafts created: %d\n", sh.Drafts())
	return sh.Drafts(), nil
}

// show prints a run's events and returns the approvals it waits for.
func show(it *adk.AsyncIterator[*adk.AgentEvent]) ([]tgeino.Approval, error) {
	var pending []tgeino.Approval
	for {
		ev, ok := it.Next()
		if !ok {
			return pending, nil
		}
		if ev.Err != nil {
			return nil, ev.Err
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			fmt.Fprintln(out, "   [eino] run interrupted: a write waits for a human")
			pending = append(pending, tgeino.Approvals(ev.Action.Interrupted.InterruptContexts)...)
		}
		if ev.Output == nil || ev.Output.MessageOutput == nil || ev.Output.MessageOutput.Message == nil {
			continue
		}
		msg := ev.Output.MessageOutput.Message
		switch {
		case msg.Role == schema.Tool:
			fmt.Fprintf(out, "tool %s: %s\n", msg.ToolName, msg.Content)
		case len(msg.ToolCalls) > 0:
			for _, c := range msg.ToolCalls {
				fmt.Fprintf(out, "model: calls %s %s (call id %s)\n", c.Function.Name, c.Function.Arguments, c.ID)
			}
		default:
			fmt.Fprintln(out, "model:", msg.Content)
		}
	}
}

// fakeModel stands in for a chat model, playing refunddemo's script on the
// conversation's last message; it numbers its call ids, so that its repeat
// of the refund is a new call, as a model's retry is.
type fakeModel struct {
	mu sync.Mutex
	n  int
}

var _ model.ToolCallingChatModel = (*fakeModel)(nil)

// Generate implements model.BaseChatModel.
func (m *fakeModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var r refunddemo.Reply
	if last := input[len(input)-1]; last.Role == schema.Tool {
		res, err := host.ModelResult(last.Content)
		r = refunddemo.Next(last.ToolName, res, err)
	} else {
		r = refunddemo.Next("", nil, nil)
	}
	if r.Tool == "" {
		return schema.AssistantMessage(r.Text, nil), nil
	}
	args, err := json.Marshal(r.Arguments)
	if err != nil {
		return nil, err
	}
	m.n++
	return schema.AssistantMessage("", []schema.ToolCall{{ID: fmt.Sprintf("call_%d", m.n), Type: "function",
		Function: schema.FunctionCall{Name: r.Tool, Arguments: string(args)}}}), nil
}

// Stream implements model.BaseChatModel.
func (m *fakeModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// WithTools implements model.ToolCallingChatModel.
func (m *fakeModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// checkpoints is Eino's CheckPointStore in memory; a real host keeps them
// where a restarted process finds them.
type checkpoints struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Get implements compose.CheckPointStore.
func (c *checkpoints) Get(_ context.Context, id string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok, nil
}

// Set implements compose.CheckPointStore.
func (c *checkpoints) Set(_ context.Context, id string, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = append([]byte(nil), b...)
	return nil
}
