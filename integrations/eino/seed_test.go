package tgeino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// einoCarrier connects a case's guard to a compiled Eino graph whose only
// node is a ToolsNode configured by tgeino: each step is an assistant
// message with one tool call, run by Eino's tool-execution path. The
// case's own ids and grant, which Eino does not carry, reach the guard
// call through Options.Call (frameworktest.SeedOptions).
func einoCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
	eg, err := tgeino.New(g, tools, frameworktest.SeedOptions(p))
	if err != nil {
		return nil, nil, err
	}
	cfg := eg.ToolsNodeConfig()
	node, err := compose.NewToolNode(ctx, &cfg)
	if err != nil {
		return nil, nil, err
	}
	run, err := compose.NewChain[*schema.Message, []*schema.Message]().AppendToolsNode(node).Compile(ctx)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
		name, args := call.Proposal.Name, string(call.Proposal.Arguments)
		if sc != nil {
			b, _ := json.Marshal(frameworktest.StatusArguments(sc))
			name, args = toolset.StatusToolName, string(b)
		}
		msg := schema.AssistantMessage("", []schema.ToolCall{{ID: call.Context.CallID, Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: args}}})
		out, err := run.Invoke(frameworktest.WithStep(ctx, call), msg)
		if err != nil {
			return "", err
		}
		if len(out) != 1 || out[0].Role != schema.Tool || out[0].ToolCallID != call.Context.CallID {
			return "", fmt.Errorf("the ToolsNode answered %d messages, want one tool message for %q", len(out), call.Context.CallID)
		}
		return out[0].Content, nil
	}, func() {}, nil
}

// TestSeedSuite runs the user's 18 cases through Eino's tool-execution
// path (einoCarrier).
func TestSeedSuite(t *testing.T) { frameworktest.SeedSuite(t, einoCarrier) }
