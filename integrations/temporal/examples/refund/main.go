// Command refund runs refunddemo's guarded refund agent as a Temporal
// workflow: the model (refunddemo's script, played by a fake OpenAI
// Responses server) reads an order and asks for a refund draft, a write
// that waits for a human; the human answers from outside the workflow
// (query, then signal), and the draft is made once, however often the
// model asks for it. It fails unless the shop made one draft when the
// human approved and none when they denied.
//
// By default it runs offline, on the Temporal SDK's test environment. With
// -hostport it runs a worker on that Temporal server (temporal server
// start-dev: -hostport localhost:7233) and starts the run through a
// client.
//
//	go run ./examples/refund                 (from integrations/temporal)
//	go run ./examples/refund -approve=false  (the human says no: nothing is drafted)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/refunddemo"
)

// logger keeps the SDK's debug lines out of the transcript.
var logger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

func main() {
	hostport := flag.String("hostport", "", "Temporal server host:port; empty runs offline on the SDK's test environment")
	namespace := flag.String("namespace", "default", "Temporal namespace")
	queue := flag.String("queue", "toolguard-refund", "task queue")
	refunddemo.Main(func(approve bool) (int, error) { return run(*hostport, *namespace, *queue, approve) })
}

// run runs the refund workflow with the human's answer and returns the
// number of refund drafts the shop made.
func run(hostport, namespace, queue string, approve bool) (int, error) {
	// The model: refunddemo's script, answering by the conversation, which
	// the workflow keeps whole.
	model, srv := refunddemo.OpenAIModel()
	defer srv.Close()

	// A real deployment keeps the guard's state in Redis (package idem),
	// shared by every worker.
	shop := refunddemo.NewShop(os.Stdout)
	g, tools, signer := shop.Guard()
	h, err := host.New(g, tools, host.Options{Signer: signer})
	if err != nil {
		return 0, err
	}
	runner := &durable.Runner{Host: h, Provider: model, Instructions: refunddemo.Instruction}
	// The principal is the run's input, never the model's; the workflow id
	// is the run's scope.
	r := durable.Run{ID: fmt.Sprintf("refund-%d", time.Now().UnixNano()),
		Principal: guard.Principal{TenantID: "acme", SubjectID: "ada"}, Input: refunddemo.Ask}
	d := host.Decision{Approved: approve, Approver: "manager-1"}
	if !approve {
		d.Reason = "not a duplicate"
	}
	fmt.Println("user:", r.Input)

	var res *durable.Result
	if hostport == "" {
		res, err = offline(runner, r, queue, d)
	} else {
		res, err = online(runner, r, hostport, namespace, queue, d)
	}
	if err != nil {
		return shop.Drafts(), err
	}
	fmt.Println("run", res.Status+":", res.Output)
	for _, c := range res.Calls { // a call: the activity toolguard.dispatch, after its turn's toolguard.turn
		fmt.Printf("  turn %d: %s %s (%s, asked: %v)\n", c.Turn, c.Tool, c.Code, c.Delivery, c.Asked)
	}
	fmt.Println("drafts created:", shop.Drafts())
	return shop.Drafts(), nil
}

// offline runs r on the SDK's test environment, answering its question
// with d once the query shows it.
func offline(runner *durable.Runner, r durable.Run, queue string, d host.Decision) (*durable.Result, error) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(logger)
	env := s.NewTestWorkflowEnvironment()
	// The workflow runs in this process beside its activities: on a
	// machine busy enough (a CI runner under -race) it can wait for the
	// CPU past the deadlock detector's default second.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 10 * time.Second})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: r.ID, TaskQueue: queue})
	if _, err := tgtemporal.Register(env, runner, tgtemporal.Options{}); err != nil {
		return nil, err
	}
	var poll func()
	poll = func() {
		v, err := env.QueryWorkflow(tgtemporal.PendingName)
		var req *host.ApprovalRequest
		if err == nil && v.Get(&req) == nil && req != nil {
			decide(*req, d)
			env.SignalWorkflow(tgtemporal.DecisionName, durable.AnswerTo(*req, d))
			return
		}
		env.RegisterDelayedCallback(poll, time.Second)
	}
	env.RegisterDelayedCallback(poll, time.Second)
	env.ExecuteWorkflow(tgtemporal.WorkflowName, r)
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var res durable.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		return nil, err
	}
	return &res, nil
}

// online runs a worker on the Temporal server at hostport, starts r
// through a client, and answers its question with d, as another process
// could (tgtemporal.Pending, then tgtemporal.Decide).
func online(runner *durable.Runner, r durable.Run, hostport, namespace, queue string, d host.Decision) (*durable.Result, error) {
	c, err := client.Dial(client.Options{HostPort: hostport, Namespace: namespace, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	w := worker.New(c, queue, worker.Options{})
	agent, err := tgtemporal.Register(w, runner, tgtemporal.Options{})
	if err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wr, err := agent.Start(ctx, c, client.StartWorkflowOptions{TaskQueue: queue}, r)
	if err != nil {
		return nil, err
	}
	for {
		req, err := tgtemporal.Pending(ctx, c, r.ID)
		if err != nil {
			return nil, err
		}
		if req != nil {
			decide(*req, d)
			if err := tgtemporal.Decide(ctx, c, *req, d); err != nil {
				return nil, err
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var res durable.Result
	if err := wr.Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// decide tells what the human was asked and answers.
func decide(req host.ApprovalRequest, d host.Decision) {
	answer := "approved"
	if !d.Approved {
		answer = "denied"
	}
	fmt.Printf("human: asked to approve %s %s for %s/%s: %s\n", req.Tool, req.Arguments,
		req.Principal.TenantID, req.Principal.SubjectID, answer)
}
