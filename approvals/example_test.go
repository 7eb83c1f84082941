package approvals_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

// Example parks a paused run, decides its request as an approver would from
// the inbox, and lets a worker resume it.
func Example() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		fakemodel.Turn{Text: "Refund draft DRAFT-1 is created."},
	)
	defer srv.Close()
	mr, _ := miniredis.Run() // an embedded Redis; any redis.UniversalClient serves
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	guardStore, _ := idem.New(rdb, idem.Options{})
	ctx := context.Background()

	svc := orders.NewService()
	tools := orders.Tools(svc)
	loop := agentloop.New(tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test")), tgopenai.ModelOptions{}), tools, agentloop.Options{Store: guardStore})
	store, _ := approvals.NewQueue(rdb, approvals.Options{Tools: tools})

	res, _ := loop.Run(ctx, guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}, "refund ORDER-7")
	reqs, _ := store.Park(ctx, res)
	fmt.Println(reqs[0].Tool, reqs[0].Status, string(reqs[0].Arguments[0].Value))

	lead := guard.Principal{TenantID: "tenant-a", SubjectID: "lead-1", Roles: []string{approvals.DefaultRole}}
	if _, err := store.Decide(ctx, lead, reqs[0].ID, host.Decision{Approved: true}, false); err != nil {
		fmt.Println(err)
	}
	worker := &approvals.Worker{Queue: store, Loop: loop, Done: func(runID string, res *agentloop.RunResult, err error) {
		fmt.Println(res.Status, res.Output, svc.SideEffects(), "draft")
	}}
	_, _ = worker.Once(ctx)
	// Output:
	// create_refund_draft pending "ORDER-7"
	// completed Refund draft DRAFT-1 is created. 1 draft
}
