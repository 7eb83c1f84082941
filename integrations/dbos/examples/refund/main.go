// Command refund runs refunddemo's guarded refund agent as a DBOS
// workflow: the model (refunddemo's script, played by a fake OpenAI
// Responses server, offline) looks an order up and drafts a refund, which
// waits for a human; the human's answer comes through DBOS
// (tgdbos.Approve), as it would from another process; the run ends with
// the model's answer, and the draft is made once, however often the
// model asks for it. It fails unless the shop made one draft when the
// human approved and none when they denied.
//
//	go run ./examples/refund -postgres postgres://postgres@127.0.0.1:5432/refund_demo
//	go run ./examples/refund -postgres … -approve=false  (the human says no: nothing is drafted)
//
// It needs one Postgres and nothing else: DBOS keeps its workflows there
// (its system database, which DBOS creates), and the guard keeps its
// records in the same database (package pgstore, schema toolguard), so a
// recovered run finds its writes with no Redis beside.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/internal/refunddemo"
	"github.com/toolguard/toolguard/pgstore"
)

func main() {
	pg := flag.String("postgres", os.Getenv("DBOS_SYSTEM_DATABASE_URL"),
		"Postgres URL of DBOS's system database (default $DBOS_SYSTEM_DATABASE_URL)")
	refunddemo.Main(func(approve bool) (int, error) { return run(*pg, approve) })
}

// run runs the refund workflow with the human's answer and returns the
// number of refund drafts the shop made.
func run(pg string, approve bool) (int, error) {
	if pg == "" {
		return 0, errors.New("no Postgres: DBOS keeps its workflows in Postgres; pass -postgres postgres://user:password@host:5432/database (or set DBOS_SYSTEM_DATABASE_URL)")
	}
	ctx := context.Background()

	// The model: refunddemo's script, answering by the conversation, which
	// the workflow keeps whole (Stateless).
	model, srv := refunddemo.OpenAIModel()
	defer srv.Close()

	// DBOS: bounded connection (it creates its database), then the Agent
	// registered, then Launch (which would recover the runs a dead process
	// of this app left).
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: pg, AppName: "toolguard-refund-example",
		ApplicationVersion: "example-1", StartupTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return 0, err
	}
	defer dbos.Shutdown(dc, 10*time.Second)

	// The shop's guard, its tools and the host step. The guard's records
	// live in DBOS's database, in a schema of their own: one Postgres.
	shop := refunddemo.NewShop(os.Stdout)
	pool, err := pgxpool.New(ctx, pg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		return 0, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := guard.NewSigner(key)
	if err != nil {
		return 0, err
	}
	tools := shop.Tools()
	g := guard.New(tools, store, guard.Options{Signer: signer})
	h, err := host.New(g, tools, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		return 0, err
	}
	agent, err := tgdbos.Register(dc, &durable.Runner{Host: h, Provider: model, Instructions: refunddemo.Instruction}, tgdbos.Options{
		// key is the question's id: a real notifier sends it as its
		// idempotency key, so that a notification DBOS repeats after a
		// crash reaches the approvers once.
		Notify: func(_ context.Context, key string, req host.ApprovalRequest) error {
			fmt.Printf("approval asked: %s %s (operation %s, question %s)\n", req.Tool, req.Arguments, req.OperationID, key)
			return nil
		}})
	if err != nil {
		return 0, err
	}
	if err := dbos.Launch(dc); err != nil {
		return 0, fmt.Errorf("launching DBOS: %w", err)
	}

	// The principal is the run's input, never the model's; the workflow id
	// is the run's scope.
	id := fmt.Sprintf("refund-%d", time.Now().UnixNano())
	fmt.Println("user:", refunddemo.Ask)
	hd, err := agent.Start(dc, durable.Run{ID: id, Principal: guard.Principal{TenantID: "acme", SubjectID: "alice"},
		Input: refunddemo.Ask})
	if err != nil {
		return 0, err
	}
	// The human, who could be another process with a dbos.Client.
	req, err := tgdbos.Pending(dc, id, time.Minute)
	if err != nil || req == nil {
		return 0, fmt.Errorf("the run asked nothing: %v", err)
	}
	d := host.Decision{Approved: approve, Approver: "manager@acme"}
	if !approve {
		d.Reason = "not a duplicate"
	}
	fmt.Printf("human: %s %s for %s/%s -> approved: %v\n", req.Tool, req.Arguments, req.Principal.TenantID, req.Principal.SubjectID, approve)
	if err := tgdbos.Approve(dc, id, d); err != nil {
		return 0, err
	}
	res, err := hd.GetResult(dbos.WithHandleTimeout(time.Minute))
	if err != nil {
		return shop.Drafts(), err
	}
	fmt.Printf("run %s: %s after %d turns: %s\n", res.RunID, res.Status, res.Turns, res.Output)
	for _, c := range res.Calls {
		fmt.Printf("  %s %s (%s, asked: %v)\n", c.Tool, c.Code, c.Delivery, c.Asked)
	}
	fmt.Println("drafts created:", shop.Drafts())
	return shop.Drafts(), nil
}
