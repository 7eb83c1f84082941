package tgchat_test

import (
	"context"
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgchat "github.com/toolguard/toolguard/adapters/chat"
	"github.com/toolguard/toolguard/adapters/internal/runtest"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/provider"
)

func model(srv *fakemodel.ChatServer) *tgchat.Model {
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	return tgchat.NewModel(client, tgchat.ModelOptions{})
}

// A chunk carrying an error mid-stream (openai-go ends the stream at it)
// ends the run failed, with the error's code as the reason, or its type
// when the code is null, one EventEnd, and the error returned as a
// provider.APIError; the call the reply would have made never runs.
func TestStreamErrorEndsRunFailed(t *testing.T) {
	for _, tc := range []struct {
		err  fakemodel.Error
		code string
	}{
		{fakemodel.Error{Message: "The server had an error while processing your request.", Type: "server_error"}, "server_error"},
		{fakemodel.Error{Message: "Rate limit reached.", Type: "requests", Code: "rate_limit_exceeded"}, "rate_limit_exceeded"},
	} {
		srv := fakemodel.NewChat(fakemodel.Turn{Text: "Let me look that up.", StreamError: &tc.err,
			Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}})
		run := runtest.Stream(t, model(srv), "where is ORDER-7?")
		if apiErr := run.Failed(t, tc.code); apiErr.Message != tc.err.Message {
			t.Errorf("message %q, want %q", apiErr.Message, tc.err.Message)
		}
		if run.Text() != "Let " {
			t.Errorf("streamed %q before the error, want the first word", run.Text())
		}
		if n := len(run.Of(agentloop.EventCall)); n != 0 {
			t.Errorf("%d calls ran", n)
		}
		srv.Close()
	}
}

// Replies cut into chunks as each server the recorded traffic comes from
// cuts them run the same: the calls with their whole arguments and ids
// as sent (functions.add:0 from Kimi on Groq), the text streamed, usage
// counted once though Groq reports it on the finish chunk and again after
// it, reasoning_content (Z.ai) kept out of the text and sent back on the
// assistant message, and a gzip body read.
func TestStreamAsServersSendIt(t *testing.T) {
	for name, tc := range map[string]struct {
		shape     fakemodel.ChatShape
		ids       [2]string
		text      string
		reasoning string
		gzip      bool
	}{
		"openai": {shape: fakemodel.ChatShape{NullContent: true, UsageNull: true}, ids: [2]string{"call_a", "call_b"}},
		"xai":    {shape: fakemodel.ChatShape{RoleWithCall: true, WholeCalls: true}, ids: [2]string{"call_55070233", "call_12016531"}},
		"groq": {shape: fakemodel.ChatShape{WholeCalls: true, UsageOnFinish: true}, ids: [2]string{"functions.get_order:0", "functions.get_order:1"},
			text: "I'll look both up."},
		"zai": {shape: fakemodel.ChatShape{WholeCalls: true, UsageOnFinish: true}, ids: [2]string{"call_4f8cb523", "call_0d06add3"},
			text: "I'll look both up.", reasoning: "The user wants two orders."},
		"gzip": {shape: fakemodel.ChatShape{NullContent: true, UsageNull: true}, ids: [2]string{"call_c", "call_d"}, gzip: true},
	} {
		t.Run(name, func(t *testing.T) {
			first := fakemodel.Turn{Text: tc.text, Reasoning: tc.reasoning, Shape: tc.shape, Gzip: tc.gzip, Calls: []fakemodel.Call{
				{CallID: tc.ids[0], Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`},
				{CallID: tc.ids[1], Name: "get_order", Arguments: `{"order_ref":"ORDER-8"}`},
			}}
			last := fakemodel.Turn{Text: "Both orders are paid.", Reasoning: tc.reasoning, Shape: tc.shape, Gzip: tc.gzip}
			srv := fakemodel.NewChat(first, last)
			defer srv.Close()
			run := runtest.Stream(t, model(srv), "are ORDER-7 and ORDER-8 paid?")
			run.Ended(t, agentloop.StatusCompleted, "")
			calls := run.Of(agentloop.EventCall)
			if len(calls) != 2 || calls[0].CallID != tc.ids[0] || calls[1].CallID != tc.ids[1] ||
				calls[0].Arguments != `{"order_ref":"ORDER-7"}` || calls[1].Arguments != `{"order_ref":"ORDER-8"}` {
				t.Fatalf("calls %+v", calls)
			}
			if got, want := run.Text(), tc.text+"Both orders are paid."; got != want {
				t.Errorf("streamed %q, want %q", got, want)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			asst := reqs[1].Messages[1]
			if asst.Role != "assistant" || asst.Content != tc.text || asst.ReasoningContent != tc.reasoning || len(asst.ToolCalls) != 2 {
				t.Errorf("the assistant message went back as %+v", asst)
			}
			for i, m := range reqs[1].ToolResults() {
				if m.ToolCallID != tc.ids[i] {
					t.Errorf("tool message %d answers %s, want %s", i, m.ToolCallID, tc.ids[i])
				}
			}

			// The usage of one reply: the fake counts 10 prompt tokens.
			srv.Enqueue(first)
			rep, err := model(srv).Turn(context.Background(), provider.Request{Items: []json.RawMessage{model(srv).UserItem("hi")},
				Text: func(string) {}})
			if err != nil {
				t.Fatal(err)
			}
			if rep.InputTokens != 10 || rep.OutputTokens != int64(len(tc.text)/4) {
				t.Errorf("usage %d in, %d out, want 10 and %d: counted once", rep.InputTokens, rep.OutputTokens, len(tc.text)/4)
			}
		})
	}
}

// A refusal streamed in pieces, or sent whole, ends the run refused,
// with none of it streamed as text.
func TestRefusalInPieces(t *testing.T) {
	for _, run := range []func(testing.TB, provider.Provider, string) *runtest.Run{runtest.Once, runtest.Stream} {
		srv := fakemodel.NewChat(fakemodel.Turn{Refusal: "I'm very sorry, but I can't assist with that request.",
			Shape: fakemodel.ChatShape{NullContent: true, UsageNull: true}})
		r := run(t, model(srv), "hi")
		r.Ended(t, agentloop.StatusRefused, "refusal")
		if r.Text() != "" {
			t.Errorf("the refusal was streamed as text: %q", r.Text())
		}
		srv.Close()
	}
}

// The reasoning_content of a tool-call turn, streamed or in the
// completion, goes back unchanged on the assistant message.
func TestReasoningSentBack(t *testing.T) {
	for _, run := range []func(testing.TB, provider.Provider, string) *runtest.Run{runtest.Once, runtest.Stream} {
		srv := fakemodel.NewChat(
			fakemodel.Turn{Reasoning: "The user wants ORDER-7.", Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
			fakemodel.Turn{Text: "It is paid."})
		run(t, model(srv), "is ORDER-7 paid?").Ended(t, agentloop.StatusCompleted, "")
		if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].Messages[1].ReasoningContent != "The user wants ORDER-7." {
			t.Errorf("requests %+v: reasoning_content not sent back", reqs)
		}
		srv.Close()
	}
}
