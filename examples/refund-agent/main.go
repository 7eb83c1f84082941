// Command refund-agent is an offline example agent: a customer asks for a
// refund of a duplicate order; the model reads the order, drafts a refund
// (a write that needs a human's approval), and then repeats the call — the
// draft is still created once. It prints the whole transcript.
//
//	go run ./examples/refund-agent               # offline: fake provider, embedded Redis
//	go run ./examples/refund-agent -approve=false
//
// Approval comes from the terminal when standard input is one, otherwise
// from -approve. With OPENAI_API_KEY set it talks to the real API; with
// TOOLGUARD_REDIS_URL (or its alias REDIS_URL) set it keeps its records in
// that Redis. Every run is a fresh run (a new run id and new call ids), so
// running it again against the same Redis drafts the refund again rather
// than replaying the previous run.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/orders"
)

func main() {
	approve := flag.Bool("approve", true, "the human's answer when standard input is not a terminal")
	flag.Parse()
	var in io.Reader
	if term.IsTerminal(int(os.Stdin.Fd())) {
		in = os.Stdin
	}
	if err := run(context.Background(), os.Stdout, in, *approve); err != nil {
		fmt.Fprintln(os.Stderr, "refund-agent:", err)
		os.Exit(1)
	}
}

// script is the fake model: it reads the order, drafts the refund, repeats
// the draft call (as models do), and reports what the tools said.
func script() []openaitest.Turn {
	return []openaitest.Turn{
		{Calls: []openaitest.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		{Text: "ORDER-7 is paid; drafting the refund.", Calls: []openaitest.Call{
			{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		{Respond: func(req openaitest.Request) *openaitest.Turn {
			// The model asks again, with its keys in another order.
			return &openaitest.Turn{Calls: []openaitest.Call{
				{Name: "create_refund_draft", Arguments: `{"reason":"duplicate","order_ref":"ORDER-7"}`}}}
		}},
		{Respond: func(req openaitest.Request) *openaitest.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Code == guard.OK {
					var d orders.Draft
					_ = json.Unmarshal(r.Data, &d)
					return &openaitest.Turn{Text: fmt.Sprintf("Done: refund draft %s for %s (%s) is created.", d.ID, d.OrderRef, d.Reason)}
				}
				return &openaitest.Turn{Text: "I could not draft the refund: " + r.Code.String() + ". " + r.Message}
			}
			return &openaitest.Turn{Text: "I could not draft the refund."}
		}},
	}
}

func run(ctx context.Context, w io.Writer, terminal io.Reader, approve bool) error {
	client, model, closeClient := demo.Client(w, script()...)
	defer closeClient()
	rdb, closeRedis, err := demo.Redis(w)
	if err != nil {
		return err
	}
	defer closeRedis()

	svc := orders.NewService()
	approver := agentloop.ApproverFunc(func(_ context.Context, req agentloop.ApprovalRequest) (agentloop.Decision, error) {
		if terminal != nil {
			fmt.Fprintf(w, "approve %s %s for %s? [y/N] ", req.Tool, req.Arguments, req.Principal.SubjectID)
			line, _ := bufio.NewReader(terminal).ReadString('\n')
			yes := strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
			return agentloop.Decision{Approved: yes, Approver: "terminal"}, nil
		}
		return agentloop.Decision{Approved: approve, Approver: "flag -approve"}, nil
	})

	// The three lines.
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{Name: model}), orders.Tools(svc), agentloop.Options{Store: rdb,
		Approver: approver, Observer: func(e agentloop.Event) { fmt.Fprintln(w, e) },
		Instructions: "You are a support agent. Use the tools; never guess an order's state."})
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"} // from the host's session
	before, err := demo.AuditCount(ctx, loop.Store(), principal.TenantID)
	if err != nil {
		return err
	}
	res, err := loop.Run(ctx, principal, "Please refund my duplicate order ORDER-7.")
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "run:       %s, %d turns, status %s\n", res.RunID, res.Turns, res.Status)
	fmt.Fprintf(w, "drafts:    %d created downstream\n", svc.SideEffects())
	return demo.PrintAudit(ctx, w, loop.Store(), principal.TenantID, before)
}
