// Command refund-agent is an offline example agent: a customer asks for a
// refund of a duplicate order; the model reads the order, drafts a refund
// (a write that needs a human's approval), and then repeats the call — the
// draft is still created once. It prints the whole transcript.
//
//	go run ./examples/refund-agent               # offline: fake Responses server, embedded Redis
//	go run ./examples/refund-agent -approve=true
//	go run ./examples/refund-agent -provider chat       # Chat Completions
//	go run ./examples/refund-agent -provider anthropic  # Anthropic Messages
//	go run ./examples/refund-agent -provider gemini     # Gemini (no call ids, as 2.x sends)
//	go run ./examples/refund-agent -stream              # the model's text as it arrives
//	go run ./examples/refund-agent -store postgres://…  # records in Postgres (package pgstore), no Redis
//
// Approval comes from the terminal when standard input is one, otherwise
// from -approve; with neither, the draft is denied (and the program says
// so): nobody said yes. Each provider runs offline against its fake server unless
// the environment names the real service: OPENAI_API_KEY for responses and
// chat (OPENAI_BASE_URL for a local OpenAI-compatible server with chat;
// OPENAI_MODEL picks the model), ANTHROPIC_API_KEY for anthropic
// (ANTHROPIC_MODEL), GEMINI_API_KEY or GOOGLE_API_KEY for gemini
// (GEMINI_MODEL). With
// TOOLGUARD_REDIS_URL (or its alias REDIS_URL) set it keeps its records in
// that Redis; with -store postgres://… in that database (schema toolguard).
// Every run is a fresh run (a new run id and new call ids), so
// running it again against the same Redis drafts the refund again rather
// than replaying the previous run.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/pgstore"
)

func main() {
	approveFlag := flag.Bool("approve", false, "the human's answer when standard input is not a terminal; without it (and without a terminal) the draft is denied")
	var set settings
	flag.StringVar(&set.provider, "provider", "responses", "the model API: "+strings.Join(demo.Providers(), ", "))
	flag.BoolVar(&set.stream, "stream", false, "print the model's text as it arrives")
	flag.StringVar(&set.store, "store", "", "a postgres:// URL: keep the records in Postgres (package pgstore) instead of Redis")
	flag.Parse()
	var approve *bool // nil: no -approve given
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "approve" {
			approve = approveFlag
		}
	})
	var in io.Reader
	if term.IsTerminal(int(os.Stdin.Fd())) {
		in = os.Stdin
	}
	if err := run(context.Background(), os.Stdout, in, approve, set); err != nil {
		fmt.Fprintln(os.Stderr, "refund-agent:", err)
		os.Exit(1)
	}
}

// script is the fake model: it reads the order, drafts the refund, repeats
// the draft call (as models do), and reports what the tools said. It is
// written once and played by the fake server of whichever provider runs.
func script() []fakemodel.Turn {
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		{Text: "ORDER-7 is paid; drafting the refund.", Calls: []fakemodel.Call{
			{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		// The model asks again, with its keys in another order.
		{Calls: []fakemodel.Call{{Name: "create_refund_draft", Arguments: `{"reason":"duplicate","order_ref":"ORDER-7"}`}}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Code == guard.CodeOK {
					var d orders.Draft
					_ = json.Unmarshal(r.Data, &d)
					return &fakemodel.Turn{Text: fmt.Sprintf("Done: refund draft %s for %s (%s) is created.", d.ID, d.OrderRef, d.Reason)}
				}
				return &fakemodel.Turn{Text: "I could not draft the refund: " + r.Code.String() + ". " + r.Message}
			}
			return &fakemodel.Turn{Text: "I could not draft the refund."}
		}},
	}
}

// settings are the flags that pick the provider and the output.
type settings struct {
	provider string // "responses" (default), "chat", "anthropic" or "gemini"
	stream   bool   // print the model's text as it arrives
	store    string // a postgres:// URL, or "" for Redis
}

// run runs the agent; the human answers from terminal when it is set, else
// approve, and nil (neither) denies.
func run(ctx context.Context, w io.Writer, terminal io.Reader, approve *bool, set settings) error {
	if set.provider == "" {
		set.provider = "responses"
	}
	model, closeModel, err := demo.Provider(w, set.provider, script()...)
	if err != nil {
		return err
	}
	defer closeModel()
	var guardStore guard.AuditStore
	if set.store != "" {
		pool, err := pgxpool.New(ctx, set.store)
		if err != nil {
			return fmt.Errorf("-store: %w", err)
		}
		defer pool.Close()
		if guardStore, err = pgstore.New(ctx, pool, pgstore.Options{}); err != nil {
			return fmt.Errorf("-store: %w", err)
		}
		fmt.Fprintln(w, "store:     Postgres (pgstore, schema toolguard)")
	} else {
		rdb, closeRedis, err := demo.Redis(w)
		if err != nil {
			return err
		}
		defer closeRedis()
		if guardStore, err = demo.Store(rdb); err != nil {
			return err
		}
	}

	svc := orders.NewService()
	approver := host.ApproverFunc(func(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
		if terminal != nil {
			fmt.Fprintf(w, "approve %s %s for %s? [y/N] ", req.Tool, req.Arguments, req.Principal.SubjectID)
			line, _ := bufio.NewReader(terminal).ReadString('\n')
			yes := strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
			return host.Decision{Approved: yes, Approver: "terminal"}, nil
		}
		if approve == nil {
			fmt.Fprintln(w, "approval:  no terminal and no -approve flag: denied by default (pass -approve=true to approve)")
			return host.Decision{Approver: "default (no terminal, no -approve)"}, nil
		}
		return host.Decision{Approved: *approve, Approver: "flag -approve"}, nil
	})

	// The three lines.
	opts := agentloop.Options{Store: guardStore, Approver: approver,
		Instructions: "You are a support agent. Use the tools; never guess an order's state."}
	if !set.stream {
		opts.Observer = func(e agentloop.Event) { fmt.Fprintln(w, e) }
	}
	loop := agentloop.New(model, orders.Tools(svc), opts)
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"} // from the host's session
	before, err := demo.AuditCount(ctx, loop.Store(), principal.TenantID)
	if err != nil {
		return err
	}
	input := "Please refund my duplicate order ORDER-7."
	var res *agentloop.RunResult
	if set.stream {
		res, err = printStream(w, loop.Stream(ctx, principal, input))
	} else {
		res, err = loop.Run(ctx, principal, input)
	}
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "run:       %s, %d turns, status %s\n", res.RunID, res.Turns, res.Status)
	fmt.Fprintf(w, "drafts:    %d created downstream\n", svc.SideEffects())
	return demo.PrintAudit(ctx, w, loop.Store(), principal.TenantID, before)
}

// printStream prints a streamed run: the model's text as it arrives, every
// other event as its transcript line.
func printStream(w io.Writer, events iter.Seq2[agentloop.Event, error]) (*agentloop.RunResult, error) {
	inText := false
	for e, err := range events {
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case agentloop.EventText:
			if !inText {
				fmt.Fprint(w, "assistant: ")
				inText = true
			}
			fmt.Fprint(w, e.Text)
		case agentloop.EventMessage:
			if inText {
				fmt.Fprintln(w)
				inText = false
			} else {
				fmt.Fprintln(w, e)
			}
		case agentloop.EventEnd:
			return e.Run, nil
		default:
			fmt.Fprintln(w, e)
		}
	}
	return nil, errors.New("the stream ended without the run's end")
}
