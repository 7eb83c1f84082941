package tgtemporal_test

import (
	"fmt"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

// Example runs a guarded run as a Temporal workflow: Register puts the
// workflow and its activities on a worker (here the SDK's in-process test
// environment; in production a worker.Worker), the run reads an order,
// asks a human before its refund draft, and a decision sent from outside
// the workflow (Pending's query, then Decide's signal, as an approver's
// process does with a client) lets the write run once.
func Example() {
	model := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "c1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "c2", Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		fakemodel.Turn{Text: "The refund draft is ready."},
	)
	defer model.Close()

	signer, _ := guard.NewSigner([]byte("a key of at least thirty-two bytes!"))
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	h, _ := host.New(g, tools, host.Options{Signer: signer})
	oc := oai.NewClient(option.WithBaseURL(model.BaseURL()), option.WithAPIKey("test"))
	runner := &durable.Runner{Host: h, Provider: tgopenai.NewModel(oc, tgopenai.ModelOptions{})}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "run-42"}) // the run's id is its workflow's
	if _, err := tgtemporal.Register(env, runner, tgtemporal.Options{}); err != nil {
		fmt.Println(err)
		return
	}
	env.RegisterDelayedCallback(func() { // the approver, a minute into the run
		v, _ := env.QueryWorkflow(tgtemporal.PendingName)
		var req *host.ApprovalRequest
		_ = v.Get(&req)
		fmt.Println("asked:", req.Tool)
		env.SignalWorkflow(tgtemporal.DecisionName, durable.AnswerTo(*req, host.Decision{Approved: true, Approver: "manager@acme"}))
	}, time.Minute)
	env.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-42",
		Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}, Input: "Refund ORDER-7, it was charged twice."})

	var res durable.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range res.Calls {
		fmt.Println(c.Tool, c.Code)
	}
	fmt.Println(res.Status, res.Output)
	// Output:
	// asked: create_refund_draft
	// get_order OK
	// create_refund_draft OK
	// completed The refund draft is ready.
}
