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
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

// out is where the transcript goes.
var out io.Writer = os.Stdout

func main() {
	approve := flag.Bool("approve", true, "the human's answer to the refund")
	flag.Parse()
	if err := run(*approve); err != nil {
		fmt.Fprintln(os.Stderr, "refund:", err)
		os.Exit(1)
	}
}

type orderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order (such as ORDER-7)."`
}

type order struct {
	OrderRef string `json:"order_ref"`
	Status   string `json:"status"`
	Amount   string `json:"amount"`
}

type refundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged"`
}

type draft struct {
	DraftID  string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
}

// shop is the downstream system: one tenant's orders, and the drafts made.
type shop struct {
	mu     sync.Mutex
	drafts map[string]draft // by the guard's downstream idempotency key
}

func (s *shop) tools() *toolset.Set {
	owns := func(inv *guard.Invocation, ref string) error {
		if inv.Principal.TenantID != "acme" || ref != "ORDER-7" {
			return guard.ErrNotFound // another tenant's order does not exist
		}
		return nil
	}
	getOrder := toolset.Read("get_order", "Look up one of the user's orders.",
		func(_ context.Context, _ *guard.Invocation, in orderIn) (order, error) {
			return order{OrderRef: in.OrderRef, Status: "paid twice", Amount: "49.00 EUR"}, nil
		}, &toolset.Options[orderIn, order]{Authorize: func(_ context.Context, inv *guard.Invocation, in orderIn) error {
			return owns(inv, in.OrderRef)
		}})
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order; a human approves it.",
		func(_ context.Context, inv *guard.Invocation, in refundIn) (draft, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			d := draft{DraftID: fmt.Sprintf("DRAFT-%d", len(s.drafts)+1), OrderRef: in.OrderRef}
			s.drafts[inv.IdempotencyKey] = d
			fmt.Fprintf(out, "   [shop] draft %s created for %s\n", d.DraftID, in.OrderRef)
			return d, nil
		}, &toolset.Options[refundIn, draft]{
			NeedsApproval:   true,
			LoggedArguments: []string{"order_ref", "reason"},
			Authorize: func(_ context.Context, inv *guard.Invocation, in refundIn) error {
				return owns(inv, in.OrderRef)
			},
			Receipt: func(_ context.Context, inv *guard.Invocation) (draft, bool, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				d, ok := s.drafts[inv.IdempotencyKey]
				return d, ok, nil
			},
		})
	return toolset.MustNew(getOrder, refund)
}

func run(approve bool) error {
	ctx := context.Background()
	sh := &shop{drafts: map[string]draft{}}
	set := sh.tools()
	signer, err := guard.NewSigner([]byte("refund example: a key of 32 bytes or more"))
	if err != nil {
		return err
	}
	g := guard.New(set, memstore.New(memstore.Options{}), guard.Options{Signer: signer})
	eg, err := tgeino.New(g, set, tgeino.Options{Signer: signer})
	if err != nil {
		return err
	}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "refunds",
		Description: "Refunds duplicate orders.",
		Instruction: "Help the user with their orders.",
		Model:       &fakeModel{},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: eg.ToolsNodeConfig()},
	})
	if err != nil {
		return err
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: &checkpoints{m: map[string][]byte{}}})

	// The principal comes from the host's session, never from the model;
	// the run id is the scope, the same on resume.
	const runID = "run-refund-1"
	ctx = tgeino.WithScope(tgeino.WithPrincipal(ctx, guard.Principal{TenantID: "acme", SubjectID: "user-1"}), runID)
	input := "I was charged twice for ORDER-7, please refund the duplicate."
	fmt.Fprintln(out, "user:", input)
	pending, err := show(runner.Query(ctx, input, adk.WithCheckPointID(runID)))
	if err != nil {
		return err
	}
	for len(pending) > 0 {
		targets := map[string]any{}
		for _, a := range pending {
			fmt.Fprintf(out, "human: asked to approve %s %s for %s/%s: ", a.Request.Tool, a.Request.Arguments,
				a.Request.Principal.TenantID, a.Request.Principal.SubjectID)
			d := agentloop.Decision{Approved: approve, Approver: "manager-1"}
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
			return err
		}
		if pending, err = show(it); err != nil {
			return err
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	fmt.Fprintf(out, "drafts created: %d\n", len(sh.drafts))
	return nil
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

// fakeModel stands in for a chat model: it reads the order, drafts the
// refund, asks for it again with a new call id (a model's retry), and
// answers from the last result it got.
type fakeModel struct {
	mu sync.Mutex
	n  int
}

var _ model.ToolCallingChatModel = (*fakeModel)(nil)

// Generate implements model.BaseChatModel.
func (m *fakeModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := &guard.Result{}
	tools := 0
	for _, msg := range input {
		if msg.Role == schema.Tool {
			tools++
			if r, err := tgeino.ModelResult(msg.Content); err == nil {
				last = r
			}
		}
	}
	call := func(name, args string) *schema.Message {
		m.n++
		return schema.AssistantMessage("", []schema.ToolCall{{ID: fmt.Sprintf("call_%d", m.n), Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: args}}})
	}
	refund := `{"order_ref":"ORDER-7","reason":"duplicate"}`
	switch {
	case tools == 0:
		return call("get_order", `{"order_ref":"ORDER-7"}`), nil
	case tools == 1:
		return call("create_refund_draft", refund), nil
	case tools == 2 && last.Code == guard.CodeOK:
		return call("create_refund_draft", refund), nil // the model repeats itself
	case last.Code == guard.CodeOK:
		return schema.AssistantMessage("Your refund is drafted: "+string(last.Data), nil), nil
	default:
		return schema.AssistantMessage("I could not refund it: "+last.Message, nil), nil
	}
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
