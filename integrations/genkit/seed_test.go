package tggenkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// genkitCarrier connects a case's guard to Genkit: each step is one
// genkit.Generate whose scripted model asks for the step's tool call (its
// ref the step's call id), run by Genkit's tool loop through the guard's
// middleware; the model result is read back from the tool response in the
// generation's history. The case's own ids and grant, which Genkit does
// not carry, reach the guard call through Options.Call
// (frameworktest.SeedOptions).
func genkitCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
	m := &script{}
	gk := newGenkit(ctx, m)
	gd, err := tggenkit.New(g, tools, frameworktest.SeedOptions(p))
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
		name, args := call.Proposal.Name, []byte(call.Proposal.Arguments)
		if sc != nil {
			args, _ = json.Marshal(frameworktest.StatusArguments(sc))
			name = toolset.StatusToolName
		}
		var input any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&input); err != nil {
			return "", fmt.Errorf("the step's arguments are not JSON Genkit can carry: %w", err)
		}
		m.push(calls(&ai.ToolRequest{Name: name, Ref: call.Context.CallID, Input: input}))
		resp, err := generate(frameworktest.WithStep(ctx, call), gk, gd, ai.WithPrompt("step"))
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
		if _, err := host.ModelResult(found.Output); err != nil {
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
func TestSeedSuite(t *testing.T) { frameworktest.SeedSuite(t, genkitCarrier) }
