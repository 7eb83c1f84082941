package tggenkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/cases"
	"github.com/toolguard/toolguard/guard"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

type stepKey struct{}

// stepCall is the host hook of the seed suite: the case's own ids and
// grant, which Genkit does not carry, set on each guard call.
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

// genkitCarrier connects a case's guard to Genkit: each step is one
// genkit.Generate whose scripted model asks for the step's tool call (its
// ref the step's call id), run by Genkit's tool loop through the guard's
// middleware; the model result is read back from the tool response in the
// generation's history.
func genkitCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
	gd, err := tggenkit.New(g, tools, tggenkit.Options{
		Principal: func(context.Context) (guard.Principal, error) { return p, nil },
		Call:      stepCall,
	})
	if err != nil {
		return nil, nil, err
	}
	m := &script{}
	gk := newGenkit(ctx, m)
	return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
		name, args := call.Proposal.Name, []byte(call.Proposal.Arguments)
		if sc != nil {
			in := map[string]any{"operation_id": sc.OperationID, "tool": nil}
			if sc.Tool != "" {
				in["tool"] = sc.Tool
			}
			args, _ = json.Marshal(in)
			name = toolset.StatusToolName
		}
		var input any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&input); err != nil {
			return "", fmt.Errorf("the step's arguments are not JSON Genkit can carry: %w", err)
		}
		m.push(calls(&ai.ToolRequest{Name: name, Ref: call.Context.CallID, Input: input}))
		resp, err := generate(context.WithValue(ctx, stepKey{}, call), gk, gd, ai.WithPrompt("step"))
		if err != nil {
			return "", err
		}
		var found *ai.ToolResponse
		for _, r := range toolResponses(resp.History()) {
			if r.Ref == call.Context.CallID {
				found = r
			}
		}
		if found == nil {
			return "", fmt.Errorf("the generation has no tool response for ref %q", call.Context.CallID)
		}
		if _, err := tggenkit.ModelResult(found.Output); err != nil {
			return "", fmt.Errorf("the tool output is not a model result: %w", err)
		}
		b, err := json.Marshal(found.Output)
		return string(b), err
	}, func() {}, nil
}

// TestSeedSuite runs the user's 18 cases through Genkit's tool-execution
// path: each step is a tool request a fake model makes in a real
// genkit.Generate, executed by Genkit's tool loop through the middleware's
// WrapTool (an unknown tool through the stand-in WrapModel registers), and
// the model result is read back from the tool response Genkit records.
func TestSeedSuite(t *testing.T) {
	f, err := cases.Load("../../testdata/tool-cases-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	passed, failed := 0, 0
	for i := range f.Cases {
		c := &f.Cases[i]
		w := cases.World{Store: memstore.New(memstore.Options{}), Close: func() {}}
		rep := cases.RunThrough(t.Context(), c, w, genkitCarrier)
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
	if len(f.Cases) != 18 {
		t.Errorf("the seed suite has %d cases, want 18", len(f.Cases))
	}
	fmt.Printf("seed suite: %d passed, %d failed\n", passed, failed)
}
