// Command approval-inbox is an offline example of a run that waits for a
// person's decision in a web page: the agent reads the order, asks to
// draft a refund (a write that needs approval), and its run is parked.
// The program serves the approvals inbox on 127.0.0.1 and prints its URL;
// a person opens it, approves or denies, and the run resumes by itself
// (a worker claims it) with the decision, printing the transcript. The
// inbox shows the order the request acts on (its status and customer,
// from the order service, through approvals.InboxOptions.Details), and
// after the run has ended it keeps serving, so the decided request and
// its outcome stay on the page, until interrupted (Ctrl-C); -exit ends
// the program with the run instead.
//
//	go run ./examples/approval-inbox                              # serve on 127.0.0.1:19280 until Ctrl-C
//	go run ./examples/approval-inbox -listen 127.0.0.1:0 -print-url -exit
//
// With -print-url the first line of standard output is the inbox URL
// alone, for a program (or test) that drives a browser to it. The inbox
// signs every visitor in as the support lead "lead-1" of tenant-a, with
// the approver role: a real host authenticates from its own session.
// Everything is offline: a fake Responses server and an embedded Redis
// (TOOLGUARD_REDIS_URL and OPENAI_API_KEY are honoured as in the other
// examples).
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19280", "where the inbox listens (keep it on loopback)")
	printURL := flag.Bool("print-url", false, "print the inbox URL alone as the first line of standard output")
	exit := flag.Bool("exit", false, "exit when the run has ended, instead of serving the inbox until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := config{listen: *listen, exit: *exit}
	if *printURL {
		cfg.onURL = func(u string) { fmt.Println(u) }
	}
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "approval-inbox:", err)
		os.Exit(1)
	}
}

// config is how main (or a test) runs the example.
type config struct {
	listen string
	// ln, if set, is used instead of listening on listen.
	ln net.Listener
	// onURL, if set, is told the inbox URL before anything is printed.
	onURL func(url string)
	// exit ends run when the agent's run has ended; otherwise the inbox
	// is served until ctx ends.
	exit bool
}

// The people of the example: the customer the agent acts for, and the
// support lead who decides.
var (
	customer = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	lead     = guard.Principal{TenantID: "tenant-a", SubjectID: "lead-1", Roles: []string{approvals.DefaultRole}}
)

// script is the fake model: it reads the order and asks to draft the
// refund. Told no, it asks once more (as models do), which is denied
// without asking the person again, and then gives up.
func script() []fakemodel.Turn {
	draft := fakemodel.Call{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}
	answer := func(req fakemodel.Request, retry bool) *fakemodel.Turn {
		for _, r := range demo.LastOutputs(req) {
			if r.Code == guard.CodeOK {
				var d orders.Draft
				_ = json.Unmarshal(r.Data, &d)
				return &fakemodel.Turn{Text: fmt.Sprintf("Done: refund draft %s for %s (%s) is created.", d.ID, d.OrderRef, d.Reason)}
			}
			if retry {
				return &fakemodel.Turn{Calls: []fakemodel.Call{draft}}
			}
			return &fakemodel.Turn{Text: "I could not draft the refund: " + r.Code.String() + ". " + r.Message}
		}
		return &fakemodel.Turn{Text: "I could not draft the refund."}
	}
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		{Text: "ORDER-7 is paid; drafting the refund.", Calls: []fakemodel.Call{draft}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn { return answer(req, true) }},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn { return answer(req, false) }},
	}
}

func run(ctx context.Context, w io.Writer, cfg config) error {
	ln := cfg.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.listen); err != nil {
			return err
		}
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String() + "/approvals/"
	if cfg.onURL != nil {
		cfg.onURL(url)
	}

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

	// One signer key for the process that parks runs and the one that
	// resumes them (here the same process).
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := guard.NewSigner(key)
	if err != nil {
		return err
	}
	svc := orders.NewService()
	tools := orders.Tools(svc)
	var out sync.Mutex // the observer and the worker print from two goroutines
	say := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(w, format, a...)
	}
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{Name: model}), tools, agentloop.Options{
		Store: guardStore, Signer: signer,
		Observer:     func(e agentloop.Event) { say("%s\n", e) },
		Instructions: "You are a support agent. Use the tools; never guess an order's state."})
	if err := loop.Err(); err != nil {
		return err
	}
	store, err := approvals.NewQueue(rdb, approvals.Options{Tools: tools, TTL: 30 * time.Minute})
	if err != nil {
		return err
	}
	inbox, err := approvals.NewInbox(approvals.InboxOptions{Queue: store,
		Authenticate: func(*http.Request) (guard.Principal, error) { return lead, nil },
		Details:      orderDetails(svc)})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", http.StripPrefix("/approvals", inbox))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	before, err := demo.AuditCount(ctx, loop.Store(), customer.TenantID)
	if err != nil {
		return err
	}
	res, err := loop.Run(ctx, customer, "Please refund my duplicate order ORDER-7.")
	if err != nil {
		return err
	}
	if res.Status != agentloop.StatusPaused {
		return fmt.Errorf("the run did not pause for approval: %s", res.Status)
	}
	if _, err := store.Park(ctx, res); err != nil {
		return err
	}
	say("inbox:     the run is parked; open %s to approve or deny (signed in as %s of %s)\n", url, lead.SubjectID, lead.TenantID)

	// The worker resumes the run once it is decided, here or in any
	// other process on the same Redis.
	ended := make(chan *agentloop.RunResult, 1)
	failed := make(chan error, 1)
	worker := &approvals.Worker{Queue: store, Loop: loop, Poll: 200 * time.Millisecond,
		Done: func(runID string, res *agentloop.RunResult, err error) {
			switch {
			case err != nil:
				failed <- err
			case res.Status == agentloop.StatusPaused:
				say("inbox:     the run paused again; the same intent was denied without asking again\n")
			default:
				ended <- res
			}
		}}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	go func() { _ = worker.Run(wctx) }()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-failed:
		return err
	case res = <-ended:
	}
	stopWorker()
	say("run:       %s, %d turns, status %s\n", res.RunID, res.Turns, res.Status)
	say("drafts:    %d created downstream\n", svc.SideEffects())
	recs, err := store.Audit(ctx, customer.TenantID)
	if err != nil {
		return err
	}
	for _, r := range recs {
		who := ""
		if r.DecidedBy != "" {
			who = " by " + r.DecidedBy
		}
		say("approvals: %s %s for %s%s\n", r.Event, r.Tool, r.RequestedBy, who)
	}
	out.Lock()
	err = demo.PrintAudit(ctx, w, loop.Store(), customer.TenantID, before)
	if err == nil && !cfg.exit {
		fmt.Fprintf(w, "inbox:     still serving %s with the decided request; Ctrl-C stops\n", url)
	}
	out.Unlock()
	if err != nil || cfg.exit {
		return err
	}
	<-ctx.Done()
	return nil
}

// orderDetails is the inbox's Details hook: the order a refund request
// names, looked up for the request's tenant only, with its status and
// customer, so the support lead decides from the order, not from an id.
func orderDetails(svc *orders.Service) func(context.Context, *approvals.Request) ([]approvals.Detail, error) {
	return func(ctx context.Context, r *approvals.Request) ([]approvals.Detail, error) {
		var ref string
		for _, f := range r.Arguments {
			if f.Name == "order_ref" && !f.Hidden {
				_ = json.Unmarshal(f.Value, &ref)
			}
		}
		if ref == "" {
			return nil, nil
		}
		o, err := svc.GetOrder(ctx, r.TenantID, ref)
		if err != nil {
			return nil, err
		}
		return []approvals.Detail{
			{Label: "Order", Text: o.Ref},
			{Label: "Order status", Text: o.Status},
			{Label: "Customer", Text: o.OwnerID},
		}, nil
	}
}
