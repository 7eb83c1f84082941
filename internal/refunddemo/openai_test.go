package refunddemo_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/refunddemo"
)

// human runs a durable run's steps at once, in the test, and answers
// every question with approve.
type human struct {
	r       *durable.Runner
	approve bool
	asked   int
}

func (h *human) Turn(in durable.TurnInput) (durable.TurnOutput, error) {
	return h.r.Turn(context.Background(), in)
}

func (h *human) Dispatch(in durable.DispatchInput) (durable.DispatchOutput, error) {
	return h.r.Dispatch(context.Background(), in)
}

func (h *human) Approve(host.ApprovalRequest) (host.Decision, error) {
	h.asked++
	return host.Decision{Approved: h.approve, Approver: "manager-1", Reason: "not a duplicate"}, nil
}

// TestOpenAITurns plays the story through OpenAIModel, a real openai-go
// client of the fake server: the
// read, the draft asked for and approved, its repeat replayed, and the
// answer; or, denied, no draft.
func TestOpenAITurns(t *testing.T) {
	for _, approve := range []bool{true, false} {
		model, srv := refunddemo.OpenAIModel()
		defer srv.Close()
		shop := refunddemo.NewShop(io.Discard)
		g, tools, signer := shop.Guard()
		hst, err := host.New(g, tools, host.Options{Signer: signer})
		if err != nil {
			t.Fatal(err)
		}
		h := &human{r: &durable.Runner{Host: hst, Provider: model, Instructions: refunddemo.Instruction}, approve: approve}
		res, err := durable.Drive(h, durable.Run{ID: "run-1", Principal: guard.Principal{TenantID: "acme", SubjectID: "ada"},
			Input: refunddemo.Ask})
		if err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, c := range res.Calls {
			calls = append(calls, c.Tool+" "+c.Code+" "+c.Delivery)
		}
		want, drafts, answer, left := "get_order OK fresh, create_refund_draft OK fresh, create_refund_draft OK local_replay", 1,
			"Your refund is drafted: {", 0
		if !approve {
			want, drafts, answer, left = "get_order OK fresh, create_refund_draft APPROVAL_REQUIRED fresh", 0,
				"I could not draft the refund: A human declined", 1
		}
		if got := strings.Join(calls, ", "); got != want || shop.Drafts() != drafts || h.asked != 1 ||
			!strings.HasPrefix(res.Output, answer) || srv.Remaining() != left {
			t.Errorf("approve=%v: calls %q, %d drafts, asked %d times, answer %q, %d turns left; want %q, %d drafts, asked once, %q…, %d left",
				approve, got, shop.Drafts(), h.asked, res.Output, srv.Remaining(), want, drafts, answer, left)
		}
	}
}

// TestOpenAITurnsNeedTheConversation: a request that does not carry the
// function_call its result answers (a model chained by
// previous_response_id) gets an answer that says so, not the story again.
func TestOpenAITurnsNeedTheConversation(t *testing.T) {
	turn := refunddemo.OpenAITurns()[0]
	got := turn.Respond(fakemodel.OpenAIRequest{Input: []fakemodel.OpenAIInput{{Type: "function_call_output", CallID: "call_1", Output: "{}"}}})
	if len(got.Calls) != 0 || !strings.Contains(got.Text, "call_1") {
		t.Errorf("got %+v; want a text naming call_1", got)
	}
	got = turn.Respond(fakemodel.OpenAIRequest{Input: []fakemodel.OpenAIInput{{Type: "message", Role: "user", Text: refunddemo.Ask}}})
	if len(got.Calls) != 1 || got.Calls[0].Name != "get_order" || got.Calls[0].Arguments != `{"order_ref":"ORDER-7"}` {
		t.Errorf("the user's turn got %+v; want a call of get_order", got)
	}
}
