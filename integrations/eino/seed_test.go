package tgeino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/cases"
	"github.com/toolguard/toolguard/guard"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

type stepKey struct{}

// stepCall is the host hook of the seed suite: the case's own ids and
// grant, which Eino does not carry, set on each guard call.
func stepCall(ctx context.Context, c *guard.Call) {
	s, ok := ctx.Value(stepKey{}).(guard.Call)
	if !ok {
		return
	}
	c.Context.ResponseID = s.Context.ResponseID
	c.Context.OperationID = s.Context.OperationID
	c.Context.IdempotencyKey = s.Context.IdempotencyKey
	c.Approval = s.Approval
}

// einoCarrier connects a case's guard to a compiled Eino graph whose only
// node is a ToolsNode configured by tgeino: each step is an assistant
// message with one tool call, run by Eino's tool-execution path.
func einoCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
	eg, err := tgeino.New(g, tools, tgeino.Options{
		Principal: func(context.Context) (guard.Principal, error) { return p, nil },
		Call:      stepCall,
	})
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
			in := map[string]any{"operation_id": sc.OperationID, "tool": nil}
			if sc.Tool != "" {
				in["tool"] = sc.Tool
			}
			b, _ := json.Marshal(in)
			name, args = toolset.StatusToolName, string(b)
		}
		msg := schema.AssistantMessage("", []schema.ToolCall{{ID: call.Context.CallID, Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: args}}})
		out, err := run.Invoke(context.WithValue(ctx, stepKey{}, call), msg)
		if err != nil {
			return "", err
		}
		if len(out) != 1 || out[0].Role != schema.Tool || out[0].ToolCallID != call.Context.CallID {
			return "", fmt.Errorf("the ToolsNode answered %d messages, want one tool message for %q", len(out), call.Context.CallID)
		}
		return out[0].Content, nil
	}, func() {}, nil
}

func TestSeedSuite(t *testing.T) {
	f, err := cases.Load("../../testdata/tool-cases-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	passed, failed := 0, 0
	for i := range f.Cases {
		c := &f.Cases[i]
		w := cases.World{Store: memstore.New(memstore.Options{}), Close: func() {}}
		rep := cases.RunThrough(ctx, c, w, einoCarrier)
		w.Close()
		if rep.Passed() {
			passed++
			continue
		}
		failed++
		t.Errorf("case %s: %v", c.ID, rep.Err)
		for _, s := range rep.Steps {
			for _, m := range s.Mismatch {
				t.Errorf("  %s/%s: %s (result %s)", c.ID, s.StepID, m, s.Result)
			}
		}
	}
	fmt.Printf("seed suite: %d passed, %d failed\n", passed, failed)
	if passed != 18 {
		t.Errorf("seed suite: %d passed, want 18", passed)
	}
}
