package tgtemporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// temporalCarrier connects a case's guard to the dispatch activity, run by
// the SDK's test activity environment (its payload conversion, its
// interceptors, its activity context): each step is one DispatchName.
// The case's own ids and grant, which a durable run does not carry, are
// set by the host's Options.Call; its scope is none (RunID ""), so that
// the case's operation ids are the ones the guard uses.
func temporalCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
	var (
		mu   sync.Mutex
		step guard.Call
	)
	h, err := host.New(g, tools, host.Options{Call: func(_ context.Context, c *guard.Call) {
		mu.Lock()
		defer mu.Unlock()
		c.Context.OperationID = step.Context.OperationID
		c.Context.IdempotencyKey = step.Context.IdempotencyKey
		c.Approval = step.Approval
	}})
	if err != nil {
		return nil, nil, err
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger)
	env := s.NewTestActivityEnvironment()
	tgtemporal.RegisterActivities(env, &tgtemporal.Activities{Runner: &durable.Runner{Host: h}})
	return func(_ context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
		name, args := call.Proposal.Name, string(call.Proposal.Arguments)
		if sc != nil {
			in := map[string]any{"operation_id": sc.OperationID, "tool": nil}
			if sc.Tool != "" {
				in["tool"] = sc.Tool
			}
			b, _ := json.Marshal(in)
			name, args = toolset.StatusToolName, string(b)
		}
		mu.Lock()
		step = call
		mu.Unlock()
		v, err := env.ExecuteActivity(tgtemporal.DispatchName, durable.DispatchInput{Principal: p,
			ResponseID: call.Context.ResponseID, Call: durable.Call{ID: call.Context.CallID, Name: name, Arguments: args}})
		if err != nil {
			return "", err
		}
		var out durable.DispatchOutput
		if err := v.Get(&out); err != nil {
			return "", err
		}
		if out.Ask != nil || len(out.Result) == 0 {
			return "", fmt.Errorf("the activity asked a human (%v) or answered nothing", out.Ask)
		}
		return string(out.Result), nil
	}, func() {}, nil
}

func TestSeedSuite(t *testing.T) {
	frameworktest.SeedSuite(t, temporalCarrier)
}
