package tgopenai_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type refundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
}

// ExampleCall is the README's "Declare tools, dispatch a call": a host that
// dispatches each function call itself, with one grant for the refund a
// human approved once. The model asks for the same refund three times,
// each time with a new call id and no key; the conversation is the scope,
// so the three calls are one operation: it runs once, and the repeats
// replay it. (Without the scope, the grant pays for the first execution
// only: the repeats would be APPROVAL_INVALID, never run.)
func ExampleCall() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "refund", Arguments: `{"order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "refund", Arguments: `{"order_ref": "ORDER-7"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "refund", Arguments: `{"order_ref":"ORDER-7"}`}}},
		fakemodel.Turn{Text: "Refunded."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))
	mr, _ := miniredis.Run()
	defer mr.Close()
	redisClient := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})

	var refunds atomic.Int32
	refund := toolset.Write("refund", "Refund an order.",
		func(ctx context.Context, inv *guard.Invocation, in refundIn) (string, error) {
			return fmt.Sprintf("refund %d of %s", refunds.Add(1), in.OrderRef), nil
		}, &toolset.Options[refundIn, string]{NeedsApproval: true})
	signer, _ := guard.NewSigner([]byte("the host's secret key, 32 bytes or more"))
	store, _ := idem.New(redisClient, idem.Options{}) // any redis.UniversalClient
	tools := toolset.MustNew(refund)
	g := guard.New(tools, store, guard.Options{Signer: signer})

	principal := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model
	conversationID := "conversation-1"                                  // the scope: where a repeat is the same intent
	// A human approved this refund once; the grant pays for one execution.
	grant, _ := signer.Sign(guard.NewGrant(principal, guard.Proposal{Name: "refund", Arguments: []byte(`{"order_ref":"ORDER-7"}`)},
		"support-lead", time.Now(), 10*time.Minute))

	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "any-model", Tools: tgopenai.Tools(tools),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Refund ORDER-7.")}}
	for {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		calls := tgopenai.Calls(resp, tools.Tools())
		if len(calls) == 0 {
			break
		}
		var outputs responses.ResponseInputParam
		for _, c := range calls {
			call := tgopenai.Call(principal, conversationID, resp.ID, c) // c.Answer is nil: every call here is complete
			call.Approval = grant
			res, _ := g.Dispatch(ctx, call)
			next := tgopenai.Output(c, res) // a function_call_output item
			outputs = append(outputs, next)
			fmt.Println(res.Code, res.Delivery, string(res.Data))
		}
		params.PreviousResponseID = oai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}
	fmt.Println("refunds made:", refunds.Load())
	// Output:
	// OK fresh "refund 1 of ORDER-7"
	// OK local_replay "refund 1 of ORDER-7"
	// OK local_replay "refund 1 of ORDER-7"
	// refunds made: 1
}
