// Command unknown-outcome is an offline example agent that shows an unknown
// outcome being settled. The order service creates the refund draft but the
// reply is lost on the way back; the guard tells the model the outcome is
// unknown (never "failed", never "retry"), the model calls the built-in
// status tool, and the guard settles the outcome from the service's receipt
// without creating a second draft.
//
//	go run ./examples/unknown-outcome
//
// With OPENAI_API_KEY set it talks to the real API; with
// TOOLGUARD_REDIS_URL (or its alias REDIS_URL) set it keeps its records in
// that Redis, each run a fresh one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "unknown-outcome:", err)
		os.Exit(1)
	}
}

// script is the fake model: it drafts the refund, and when told the outcome
// is unknown it asks for the operation's status instead of retrying.
func script() []fakemodel.Turn {
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"damaged"}`}}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Recovery() == guard.RecoveryQueryStatus {
					args, _ := json.Marshal(toolset.StatusInput{OperationID: r.OperationID})
					return &fakemodel.Turn{Text: "The result was lost; checking what happened.",
						Calls: []fakemodel.Call{{Name: toolset.StatusToolName, Arguments: string(args)}}}
				}
			}
			return &fakemodel.Turn{Text: "The refund draft is created."}
		}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Code == guard.CodeOK {
					var d orders.Draft
					_ = json.Unmarshal(r.Data, &d)
					return &fakemodel.Turn{Text: fmt.Sprintf("Confirmed: refund draft %s exists for %s; nothing was created twice.", d.ID, d.OrderRef)}
				}
			}
			return &fakemodel.Turn{Text: "I cannot confirm the refund yet; a human should check it."}
		}},
	}
}

func run(ctx context.Context, w io.Writer) error {
	client, model, closeClient := demo.Client(w, script()...)
	defer closeClient()
	rdb, closeRedis, err := demo.Redis(w)
	if err != nil {
		return err
	}
	defer closeRedis()
	guardStore, err := demo.Store(rdb)
	if err != nil {
		return err
	}

	svc := orders.NewService()
	svc.FailNext(orders.FailAfterCommit) // the draft is created, then the reply is lost
	approveAll := host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
		return host.Decision{Approved: true, Approver: "auto-approver"}, nil
	})
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{Name: model}), orders.Tools(svc), agentloop.Options{Store: guardStore,
		Approver: approveAll, Observer: func(e agentloop.Event) { fmt.Fprintln(w, e) }})
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	before, err := demo.AuditCount(ctx, loop.Store(), principal.TenantID)
	if err != nil {
		return err
	}
	res, err := loop.Run(ctx, principal, "My order ORDER-7 arrived damaged, please refund it.")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "run:       %s, %d turns, status %s\n", res.RunID, res.Turns, res.Status)
	fmt.Fprintf(w, "drafts:    %d created downstream\n", svc.SideEffects())
	return demo.PrintAudit(ctx, w, loop.Store(), principal.TenantID, before)
}
