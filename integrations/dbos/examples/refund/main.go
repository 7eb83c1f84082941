// Command refund runs a guarded refund agent as a DBOS workflow: the model
// (a scripted fake OpenAI Responses server, offline) looks an order up and
// drafts a refund, which waits for a human; the human's yes comes through
// DBOS (tgdbos.Approve), as it would from another process; the run ends
// with the model's answer.
//
//	go run ./examples/refund -postgres postgres://postgres@127.0.0.1:5432/refund_demo
//
// It needs a Postgres for DBOS's system database (DBOS creates the
// database); the idempotency store is in memory here (use idem over Redis
// in production, so that a recovered run finds its writes).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/memstore"
	"github.com/toolguard/toolguard/toolset"
)

type orderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order."`
}

type refundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged"`
}

type order struct {
	OrderRef string `json:"order_ref"`
	Status   string `json:"status"`
}

type draft struct {
	DraftID string `json:"draft_id"`
}

func main() {
	pg := flag.String("postgres", os.Getenv("DBOS_SYSTEM_DATABASE_URL"),
		"Postgres URL of DBOS's system database (default $DBOS_SYSTEM_DATABASE_URL)")
	flag.Parse()
	if err := run(*pg); err != nil {
		fmt.Fprintln(os.Stderr, "refund:", err)
		os.Exit(1)
	}
}

func run(pg string) error {
	if pg == "" {
		return errors.New("no Postgres: DBOS keeps its workflows in Postgres; pass -postgres postgres://user:password@host:5432/database (or set DBOS_SYSTEM_DATABASE_URL)")
	}
	ctx := context.Background()

	// The model: a scripted fake Responses API, answering by the
	// conversation: get_order, then the refund, then a final text.
	srv := openaitest.NewServer(openaitest.Turn{Respond: script}, openaitest.Turn{Respond: script}, openaitest.Turn{Respond: script},
		openaitest.Turn{Respond: script})
	defer srv.Close()
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline")),
		tgopenai.ModelOptions{Stateless: true})

	// The guard, its tools and the host step.
	get := toolset.Read("get_order", "Look up an order.", func(_ context.Context, _ *guard.Invocation, in orderIn) (order, error) {
		return order{OrderRef: in.OrderRef, Status: "paid"}, nil
	}, nil)
	refund := toolset.Write("create_refund_draft", "Draft a refund.", func(_ context.Context, inv *guard.Invocation, in refundIn) (draft, error) {
		return draft{DraftID: "DRAFT-" + in.OrderRef}, nil
	}, &toolset.Options[refundIn, draft]{NeedsApproval: true})
	set := toolset.MustNew(get, refund)
	signer, err := guard.NewSigner([]byte("example-signing-key-of-32-bytes!"))
	if err != nil {
		return err
	}
	g := guard.New(set, memstore.New(memstore.Options{}), guard.Options{Signer: signer})
	h, err := host.New(g, set, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		return err
	}

	// DBOS: bounded connection, the Agent registered, then Launch (which
	// would recover the runs a dead process of this app left).
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: pg, AppName: "toolguard-refund-example",
		ApplicationVersion: "example-1", StartupTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer dbos.Shutdown(dc, 10*time.Second)
	agent, err := tgdbos.Register(dc, &durable.Runner{Host: h, Provider: model, Instructions: "Refund agent."}, tgdbos.Options{
		Notify: func(_ context.Context, req host.ApprovalRequest) error {
			fmt.Printf("approval asked: %s %s (operation %s)\n", req.Tool, req.Arguments, req.OperationID)
			return nil
		}})
	if err != nil {
		return err
	}
	if err := dbos.Launch(dc); err != nil {
		return fmt.Errorf("launching DBOS: %w", err)
	}

	id := fmt.Sprintf("refund-%d", time.Now().UnixNano())
	hd, err := agent.Start(dc, durable.Run{ID: id, Principal: guard.Principal{TenantID: "acme", SubjectID: "alice"},
		Input: "refund ORDER-7"})
	if err != nil {
		return err
	}
	// The human, who could be another process with a dbos.Client.
	req, err := tgdbos.Pending(dc, id, time.Minute)
	if err != nil || req == nil {
		return fmt.Errorf("the run asked nothing: %v", err)
	}
	if err := tgdbos.Approve(dc, id, host.Decision{Approved: true, Approver: "manager@acme"}); err != nil {
		return err
	}
	res, err := hd.GetResult(dbos.WithHandleTimeout(time.Minute))
	if err != nil {
		return err
	}
	fmt.Printf("run %s: %s after %d turns: %s\n", res.RunID, res.Status, res.Turns, res.Output)
	for _, c := range res.Calls {
		fmt.Printf("  %s %s (%s, asked: %v)\n", c.Tool, c.Code, c.Delivery, c.Asked)
	}
	return nil
}

// script is the fake model's reply to the conversation so far.
func script(req openaitest.Request) *openaitest.Turn {
	outs := map[string]string{}
	for _, o := range req.FunctionCallOutputs() {
		outs[o.CallID] = o.Output
	}
	switch {
	case outs["call_get"] == "":
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: "get_order", CallID: "call_get", Arguments: `{"order_ref":"ORDER-7"}`}}}
	case outs["call_refund"] == "":
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: "create_refund_draft", CallID: "call_refund",
			Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}}
	}
	if strings.Contains(outs["call_refund"], "DRAFT-ORDER-7") {
		return &openaitest.Turn{Text: "I drafted refund DRAFT-ORDER-7 for ORDER-7."}
	}
	return &openaitest.Turn{Text: "The refund was not drafted."}
}
