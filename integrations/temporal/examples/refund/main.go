// Command refund runs a guarded refund agent as a Temporal workflow: the
// model (a scripted fake of the OpenAI Responses API) reads an order and
// asks for a refund draft, a write that waits for a human; the human
// approves it from outside the workflow (query, then signal), and the
// draft is created once.
//
// By default it runs offline, on the Temporal SDK's test environment. With
// -hostport it runs a worker on that Temporal server (temporal server
// start-dev: -hostport localhost:7233) and starts the run through a
// client.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/memstore"
)

func main() {
	hostport := flag.String("hostport", "", "Temporal server host:port; empty runs offline on the SDK's test environment")
	namespace := flag.String("namespace", "default", "Temporal namespace")
	queue := flag.String("queue", "toolguard-refund", "task queue")
	flag.Parse()
	if err := run(*hostport, *namespace, *queue); err != nil {
		log.Fatal(err)
	}
}

func run(hostport, namespace, queue string) error {
	srv := openaitest.NewServer(
		openaitest.Turn{Calls: []openaitest.Call{{CallID: "c1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		openaitest.Turn{Calls: []openaitest.Call{{CallID: "c2", Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		openaitest.Turn{Text: "Your refund draft is ready."})
	defer srv.Close()
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline")), tgopenai.ModelOptions{Name: "scripted-model"})

	svc := orders.NewService()
	tools := orders.Tools(svc)
	signer, err := guard.NewSigner(bytes.Repeat([]byte("refund-example-key/"), 2))
	if err != nil {
		return err
	}
	// A real deployment keeps the guard's state in Redis (package idem),
	// shared by every worker.
	g := guard.New(tools, memstore.New(memstore.Options{}), guard.Options{Signer: signer})
	h, err := host.New(g, tools, host.Options{Signer: signer})
	if err != nil {
		return err
	}
	runner := &durable.Runner{Host: h, Provider: model, Instructions: "You handle refunds."}
	r := durable.Run{ID: fmt.Sprintf("refund-%d", time.Now().UnixNano()),
		Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}, Input: "Refund ORDER-7, I was charged twice."}
	approve := host.Decision{Approved: true, Approver: "ann"}

	var res durable.Result
	if hostport == "" {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: r.ID, TaskQueue: queue})
		if err := tgtemporal.Register(env, runner, tgtemporal.Options{}); err != nil {
			return err
		}
		var poll func()
		poll = func() {
			v, err := env.QueryWorkflow(tgtemporal.QueryPending)
			var req *host.ApprovalRequest
			if err == nil && v.Get(&req) == nil && req != nil {
				fmt.Printf("asked: %s %s\n", req.Tool, req.Arguments)
				env.SignalWorkflow(tgtemporal.SignalDecision, tgtemporal.SignalOf(*req, approve))
				return
			}
			env.RegisterDelayedCallback(poll, time.Second)
		}
		env.RegisterDelayedCallback(poll, time.Second)
		env.ExecuteWorkflow(tgtemporal.WorkflowName, r)
		if err := env.GetWorkflowError(); err != nil {
			return err
		}
		if err := env.GetWorkflowResult(&res); err != nil {
			return err
		}
	} else {
		c, err := client.Dial(client.Options{HostPort: hostport, Namespace: namespace})
		if err != nil {
			return err
		}
		defer c.Close()
		w := worker.New(c, queue, worker.Options{})
		if err := tgtemporal.Register(w, runner, tgtemporal.Options{}); err != nil {
			return err
		}
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		wr, err := tgtemporal.Start(ctx, c, client.StartWorkflowOptions{TaskQueue: queue}, r)
		if err != nil {
			return err
		}
		// The approver's side, which could be another process.
		for {
			req, err := tgtemporal.Pending(ctx, c, r.ID)
			if err != nil {
				return err
			}
			if req != nil {
				fmt.Printf("asked: %s %s\n", req.Tool, req.Arguments)
				if err := tgtemporal.Decide(ctx, c, *req, approve); err != nil {
					return err
				}
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := wr.Get(ctx, &res); err != nil {
			return err
		}
	}
	fmt.Println(res.Status, res.Output)
	for _, c := range res.Calls {
		fmt.Println(c.Tool, c.Code, "asked:", c.Asked)
	}
	fmt.Println("drafts created:", svc.SideEffects())
	if svc.SideEffects() != 1 {
		os.Exit(1)
	}
	return nil
}
