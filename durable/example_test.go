package durable_test

import (
	"bytes"
	"context"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

// inline is the smallest engine: each step runs at once, in this process,
// and the human is a function. A real engine records each step (see
// integrations/temporal).
type inline struct {
	ctx context.Context
	r   *durable.Runner
}

func (e inline) Turn(in durable.TurnInput) (durable.TurnOutput, error) { return e.r.Turn(e.ctx, in) }
func (e inline) Dispatch(in durable.DispatchInput) (durable.DispatchOutput, error) {
	return e.r.Dispatch(e.ctx, in)
}
func (e inline) Approve(req host.ApprovalRequest) (host.Decision, error) {
	fmt.Printf("asked: %s %s\n", req.Tool, req.Arguments)
	return host.Decision{Approved: true, Approver: "ann"}, nil
}

func Example() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "c1", Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}}},
		fakemodel.Turn{Text: "The refund draft is ready."})
	defer srv.Close()
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test")), tgopenai.ModelOptions{Name: "scripted-model"})

	svc := orders.NewService()
	tools := orders.Tools(svc)
	signer, _ := guard.NewSigner(bytes.Repeat([]byte("example-key/"), 3))
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	h, err := host.New(g, tools, host.Options{Signer: signer})
	if err != nil {
		fmt.Println(err)
		return
	}
	runner := &durable.Runner{Host: h, Provider: model}

	res, err := durable.Drive(inline{context.Background(), runner}, durable.Run{ID: "run-42",
		Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}, Input: "Refund ORDER-7, I was charged twice."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Output)
	for _, c := range res.Calls {
		fmt.Println(c.Tool, c.Code, c.Delivery, "asked:", c.Asked)
	}
	fmt.Println("drafts created:", svc.SideEffects())
	// Output:
	// asked: create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"}
	// completed The refund draft is ready.
	// create_refund_draft OK fresh asked: true
	// drafts created: 1
}
