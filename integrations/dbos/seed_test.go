package tgdbos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

type seedKey struct{}

// seedCall is the host hook of the seed suite: the case's own execution
// context and grant, which a model's tool call does not carry, set on
// each guard call (host.Options.Call, which durable.Runner applies).
func seedCall(ctx context.Context, c *guard.Call) {
	s, ok := ctx.Value(seedKey{}).(guard.Call)
	if !ok {
		return
	}
	c.Context = s.Context
	c.Approval = s.Approval
}

// The seed suite's runners (one per case world) and the calls of its
// steps, by workflow id: the workflow's input names them.
var (
	seedRunners sync.Map // world id -> *durable.Runner
	seedCalls   sync.Map // workflow id -> guard.Call
	seedN       atomic.Int64
)

// seedInput is a seed step's workflow input.
type seedInput struct {
	World string `json:"world"`
}

// seedWorkflow dispatches one case step through a DBOS step of this
// package (tgdbos.NewSteps' Dispatch) and returns the model result.
func seedWorkflow(ctx dbos.Context, in seedInput) (string, error) {
	id, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return "", err
	}
	rv, ok1 := seedRunners.Load(in.World)
	cv, ok2 := seedCalls.Load(id)
	if !ok1 || !ok2 {
		return "", errors.New("seed: unknown world or step")
	}
	call := cv.(guard.Call)
	s := tgdbos.NewSteps(dbos.WithValue(ctx, seedKey{}, call), rv.(*durable.Runner), tgdbos.Options{})
	out, err := s.Dispatch(durable.DispatchInput{RunID: id, Principal: call.Principal, ResponseID: call.Context.ResponseID,
		Call: durable.Call{ID: call.Context.CallID, Name: call.Proposal.Name, Arguments: string(call.Proposal.Arguments)}})
	if err != nil {
		return "", err
	}
	if out.Ask != nil {
		return "", errors.New("seed: the step asked a human")
	}
	return string(out.Result), nil
}

// dbosCarrier connects a case's guard to DBOS: each step is a workflow
// whose one step is this package's dispatch step.
func dbosCarrier(dc dbos.Context) cases.Connect {
	return func(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
		h, err := host.New(g, tools, host.Options{Call: seedCall})
		if err != nil {
			return nil, nil, err
		}
		world := fmt.Sprintf("w%d", seedN.Add(1))
		seedRunners.Store(world, &durable.Runner{Host: h})
		return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
			if sc != nil {
				in := map[string]any{"operation_id": sc.OperationID, "tool": nil}
				if sc.Tool != "" {
					in["tool"] = sc.Tool
				}
				b, _ := json.Marshal(in)
				call.Principal, call.Context = sc.Principal, sc.Context
				call.Proposal = guard.Proposal{Name: toolset.StatusToolName, Arguments: b}
			}
			id := fmt.Sprintf("seed-%s-%d", world, seedN.Add(1))
			seedCalls.Store(id, call)
			defer seedCalls.Delete(id)
			hd, err := dbos.RunWorkflow(dc, seedWorkflow, seedInput{World: world}, dbos.WithWorkflowID(id))
			if err != nil {
				return "", err
			}
			return hd.GetResult(dbos.WithHandleTimeout(deadline))
		}, func() { seedRunners.Delete(world) }, nil
	}
}

// TestSeedSuite runs testdata/tool-cases-v2.json with every step
// dispatched through a DBOS step of a workflow, over a real Postgres.
func TestSeedSuite(t *testing.T) {
	ctx := context.Background()
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: postgresURL(t, "seed"), AppName: "tgdbos-seed", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	dbos.RegisterWorkflow(dc, seedWorkflow, dbos.WithWorkflowName("tgdbos-seed-step"))
	if err := dbos.Launch(dc); err != nil {
		t.Fatal(err)
	}
	defer dbos.Shutdown(dc, 10*time.Second)
	frameworktest.SeedSuite(t, dbosCarrier(dc))
}
