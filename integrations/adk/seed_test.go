package tgadk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// TestSeedSuite runs the user's 18 cases through ADK's tool-execution
// path: each step is a function call a fake model makes in a real
// runner.Run, executed by ADK (the guarded tool's Run, or, for an unknown
// tool, the plugin's OnToolErrorCallback), and the model result is read
// back from the function response ADK records.
func TestSeedSuite(t *testing.T) { frameworktest.SeedSuite(t, adkCarrier(t)) }

// adkCarrier connects a case's guard to ADK: the case's tools become the
// agent's tools through tgadk.New, and each step is one user turn whose
// model reply is the step's function call. The step's
// ids (operation id, idempotency key) and approval reach the guard call
// through Options.Call; the call id is the function call's, which the fake
// model gives the step's.
func adkCarrier(t *testing.T) cases.Connect {
	return func(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
		var step frameworktest.Step
		a, err := tgadk.New(g, tools, tgadk.Options{Options: host.Options{
			Principal: func(context.Context) (guard.Principal, error) { return p, nil },
			Call:      func(_ context.Context, call *guard.Call) { step.Apply(call) },
		}})
		if err != nil {
			return nil, nil, err
		}
		m := &fakeModel{}
		r := newRunner(t, a, m)
		n := 0
		return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
			fc := &genai.FunctionCall{ID: call.Context.CallID, Name: call.Proposal.Name}
			if sc != nil {
				call.Context = sc.Context
				fc.Name, fc.Args = toolset.StatusToolName, frameworktest.StatusArguments(sc)
			} else if err := json.Unmarshal(call.Proposal.Arguments, &fc.Args); err != nil {
				return "", fmt.Errorf("the step's arguments are not an object ADK can carry: %w", err)
			}
			step.Set(call)
			m.push(calls(fc))
			n++
			return carry(ctx, r, fmt.Sprintf("step %d", n), fc.ID)
		}, func() {}, nil
	}
}

// carry runs one user turn and returns the function response answering
// callID, as JSON.
func carry(ctx context.Context, r *runner.Runner, text, callID string) (string, error) {
	var found map[string]any
	for ev, err := range r.Run(ctx, "user", "session", genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return "", err
		}
		for _, fr := range responses([]*session.Event{ev}) {
			if fr.ID == callID {
				found = fr.Response
			}
		}
	}
	if found == nil {
		return "", fmt.Errorf("ADK recorded no function response for call %q", callID)
	}
	if _, err := host.ModelResult(found); err != nil {
		return "", fmt.Errorf("the function response is not a model result: %w", err)
	}
	b, err := json.Marshal(found)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
