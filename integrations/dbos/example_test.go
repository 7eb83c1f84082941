package tgdbos_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
)

// The worker registers the Agent and launches DBOS (which recovers the
// runs a dead process left); the host starts a run; a human, from any
// process with a DBOS client, reads the question and answers it. It needs
// a Postgres, so it is compiled, not run: examples/refund runs it.
func Example() {
	ctx := context.Background()
	var runner *durable.Runner // host.New over the guard, and the provider
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: "postgres://app@db:5432/app", AppName: "shop", ApplicationVersion: "v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dbos.Shutdown(dc, 10*time.Second)
	agent, err := tgdbos.Register(dc, runner, tgdbos.Options{ApprovalTimeout: 4 * time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := dbos.Launch(dc); err != nil {
		fmt.Println(err)
		return
	}
	h, err := agent.Start(dc, durable.Run{ID: "run-42", Principal: guard.Principal{TenantID: "acme", SubjectID: "alice"},
		Input: "Refund ORDER-7, it was charged twice."})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Elsewhere: the approver's process.
	client, _ := dbos.NewClient(ctx, dbos.ClientConfig{DatabaseURL: "postgres://app@db:5432/app", AppName: "shop"})
	if req, _ := tgdbos.Pending(client, "run-42", time.Minute); req != nil {
		_ = tgdbos.Approve(client, "run-42", host.Decision{Approved: true, Approver: "manager@acme"})
	}

	res, err := h.GetResult()
	if err == nil {
		fmt.Println(res.Status, res.Output)
	}
}
