package tganthropic_test

import (
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/adapters/internal/runtest"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/provider"
)

func model(srv *fakemodel.AnthropicServer, opts tganthropic.ModelOptions) *tganthropic.Model {
	client := sdk.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	return tganthropic.NewModel(client, opts)
}

// An error event inside the stream (the API overloaded after the reply
// began) ends the run failed, with the error's type as the reason, one
// EventEnd, and the error returned as a provider.APIError; the text that
// came before it was streamed, and the call it would have made never runs.
func TestStreamErrorEndsRunFailed(t *testing.T) {
	srv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "Let me look that up.",
		Calls:       []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}},
		StreamError: &fakemodel.Error{Type: "overloaded_error", Message: "Overloaded"}})
	defer srv.Close()
	run := runtest.Stream(t, model(srv, tganthropic.ModelOptions{}), "where is ORDER-7?")
	apiErr := run.Failed(t, "overloaded_error")
	if apiErr.Message != "Overloaded" {
		t.Errorf("message %q", apiErr.Message)
	}
	if run.Text() != "Let " {
		t.Errorf("streamed %q before the error, want the first word", run.Text())
	}
	if n := len(run.Of(agentloop.EventCall)); n != 0 {
		t.Errorf("%d calls ran", n)
	}
}

// A reply as the API streams it, every part a test of what the adapter
// does with it: pings between events; a thinking block streamed as
// thinking_delta pieces and a signature_delta, which must come back
// first in the next request's assistant message with its signature
// unchanged (with thinking enabled the fake, as the API, refuses it
// otherwise); tool_use blocks that start with a caller and an input of
// "{  }" and stream it from an empty first piece in several pieces (the
// SDK's accumulator alone turns that input into {}); data JSON with white
// space inside; a gzip body. The calls run with their whole arguments,
// the thinking is not streamed as text, and the run completes.
func TestStreamAsTheAPISendsIt(t *testing.T) {
	srv := fakemodel.NewAnthropic(
		fakemodel.Turn{Reasoning: "The user wants ORDER-7 and ORDER-8.", Text: "Let me look both up.", Spaced: true, Gzip: true,
			Calls: []fakemodel.Call{
				{CallID: "toolu_1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`},
				{CallID: "toolu_2", Name: "get_order", Arguments: `{"order_ref":"ORDER-8"}`},
			}},
		fakemodel.Turn{Reasoning: "Both are paid.", Text: "Both orders are paid.", Spaced: true, Gzip: true},
	)
	defer srv.Close()
	m := model(srv, tganthropic.ModelOptions{Params: func(p *sdk.MessageNewParams) {
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(1024)
	}})
	run := runtest.Stream(t, m, "are ORDER-7 and ORDER-8 paid?")
	run.Ended(t, agentloop.StatusCompleted, "")
	calls := run.Of(agentloop.EventCall)
	if len(calls) != 2 || calls[0].Arguments != `{"order_ref":"ORDER-7"}` || calls[1].Arguments != `{"order_ref":"ORDER-8"}` {
		t.Fatalf("calls %+v, want both with their whole input", calls)
	}
	for _, r := range run.Of(agentloop.EventResult) {
		if !strings.Contains(string(r.Result), `"code":"OK"`) {
			t.Errorf("result %s", r.Result)
		}
	}
	if got, want := run.Text(), "Let me look both up.Both orders are paid."; got != want {
		t.Errorf("streamed %q, want %q (no thinking)", got, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].StatusCode != 200 {
		t.Fatalf("requests %+v", reqs)
	}
	asst := reqs[1].Messages[1]
	want := fakemodel.ThinkingBlock{Thinking: "The user wants ORDER-7 and ORDER-8.", Signature: fakemodel.AnthropicSignature("The user wants ORDER-7 and ORDER-8.")}
	if len(asst.Thinking) != 1 || asst.Thinking[0] != want || strings.Join(asst.Types, " ") != "thinking text tool_use tool_use" {
		t.Errorf("the assistant message went back as %v %+v, want the thinking block first, unchanged", asst.Types, asst.Thinking)
	}
}

// A thinking block sent back changed is refused by the fake as by the
// API, and so is a tool-use turn without it when thinking is enabled.
func TestThinkingChecked(t *testing.T) {
	srv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "never"})
	defer srv.Close()
	c := sdk.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	user := sdk.NewUserMessage(sdk.NewTextBlock("hi"))
	result := sdk.NewUserMessage(sdk.NewToolResultBlock("tu1", "{}", false))
	use := sdk.NewToolUseBlock("tu1", map[string]any{}, "f")
	for name, msgs := range map[string][]sdk.MessageParam{
		"changed": {user, sdk.NewAssistantMessage(sdk.NewThinkingBlock(fakemodel.AnthropicSignature("a"), "b"), use), result},
		"missing": {user, sdk.NewAssistantMessage(use), result},
	} {
		_, err := c.Messages.New(t.Context(), sdk.MessageNewParams{Model: "m", MaxTokens: 10, Messages: msgs,
			Thinking: sdk.ThinkingConfigParamOfEnabled(1024)})
		if err == nil || !strings.Contains(err.Error(), "thinking") {
			t.Errorf("%s: %v, want a 400 about the thinking block", name, err)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("a refused request consumed a turn")
	}
}

// A refusal with stop_details (its category), streamed or not, ends the
// run refused, and the call the message carries is not answered: streamed,
// the read may have run early, and then its result reaches no one, which
// the transcript says.
func TestRefusalWithStopDetails(t *testing.T) {
	for _, run := range []func(testing.TB, provider.Provider, string) *runtest.Run{runtest.Once, runtest.Stream} {
		srv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "I can't help with that.", Finish: "refusal",
			StopDetails: &fakemodel.StopDetails{Category: "cyber", Explanation: "The request touches on cyber harm."},
			Calls:       []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}})
		r := run(t, model(srv, tganthropic.ModelOptions{}), "hi")
		r.Ended(t, agentloop.StatusRefused, "refusal")
		if n, u := len(r.Of(agentloop.EventCall)), len(r.Of(agentloop.EventUnanswered)); n != u {
			t.Errorf("%d calls, %d of them said unanswered", n, u)
		}
		srv.Close()
	}
}
