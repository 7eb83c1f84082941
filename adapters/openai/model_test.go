package tgopenai_test

import (
	"encoding/json"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolguard/toolguard/adapters/internal/runtest"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/provider"
)

func model(srv *fakemodel.OpenAIServer, stateless bool) *tgopenai.Model {
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	return tgopenai.NewModel(client, tgopenai.ModelOptions{Stateless: stateless})
}

// An error event mid-stream ends the run failed with the error's code, one
// EventEnd, and the error returned as a provider.APIError: in the shape
// the API was recorded sending (nested "error", which openai-go ends the
// stream at, then response.failed) and in the documented flat shape
// (which openai-go reads as an event, and nothing follows). The text
// before it was streamed; the call after it never runs. Not streamed, it
// is a failed response, which ends the run the same way.
func TestStreamErrorEndsRunFailed(t *testing.T) {
	for _, flat := range []bool{false, true} {
		e := &fakemodel.Error{Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."}
		srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "Let me look that up.", StreamError: e, ErrorFlat: flat,
			Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}})
		run := runtest.Stream(t, model(srv, false), "where is ORDER-7?")
		if apiErr := run.Failed(t, "insufficient_quota"); apiErr.Message != e.Message {
			t.Errorf("flat %v: message %q", flat, apiErr.Message)
		}
		if run.Text() != "Let " {
			t.Errorf("flat %v: streamed %q before the error, want the first word", flat, run.Text())
		}
		if n := len(run.Of(agentloop.EventCall)); n != 0 {
			t.Errorf("flat %v: %d calls ran", flat, n)
		}
		srv.Close()
	}
	// Not streamed, the same error is a failed response.
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "Let me look that up.",
		StreamError: &fakemodel.Error{Type: "server_error", Code: "server_error", Message: "The server had an error."}})
	defer srv.Close()
	if apiErr := runtest.Once(t, model(srv, false), "hi").Failed(t, "server_error"); apiErr.Message != "The server had an error." {
		t.Errorf("message %q", apiErr.Message)
	}
}

// A stateless run on a stream as the API sends it: a reasoning item with
// a summary (streamed as summary events, none of it as text) and
// encrypted_content (provisional in output_item.added, final in the
// response: the fake refuses the provisional one back), a commentary
// message before the calls, arguments in many deltas, fields the SDK does
// not know, a gzip body. The calls run with their whole arguments, and
// the next request sends the reasoning item, the commentary message with
// its phase and the calls back as the response gave them.
func TestStreamAsTheAPISendsIt(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Reasoning: "two lookups", Summary: "**Looking up orders**\n\nThe user wants ORDER-7 and ORDER-8.",
			Text: "I'll look both up.", Commentary: true, Gzip: true, Calls: []fakemodel.Call{
				{CallID: "call_a", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`},
				{CallID: "call_b", Name: "get_order", Arguments: `{"order_ref":"ORDER-8"}`},
			}},
		fakemodel.Turn{Reasoning: "both paid", Summary: "Both are paid.", Text: "Both orders are paid.", Gzip: true},
	)
	defer srv.Close()
	run := runtest.Stream(t, model(srv, true), "are ORDER-7 and ORDER-8 paid?")
	run.Ended(t, agentloop.StatusCompleted, "")
	calls := run.Of(agentloop.EventCall)
	if len(calls) != 2 || calls[0].Arguments != `{"order_ref":"ORDER-7"}` || calls[1].Arguments != `{"order_ref":"ORDER-8"}` {
		t.Fatalf("calls %+v", calls)
	}
	if got, want := run.Text(), "I'll look both up.Both orders are paid."; got != want {
		t.Errorf("streamed %q, want %q (no summary)", got, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].StatusCode != 200 {
		t.Fatalf("requests %+v", reqs)
	}
	var types []string
	for _, it := range reqs[1].Input {
		types = append(types, it.Type)
		var item struct {
			Phase   string `json:"phase"`
			Summary []struct {
				Text string `json:"text"`
			} `json:"summary"`
		}
		_ = json.Unmarshal(it.Raw, &item)
		switch it.Type {
		case "reasoning":
			if len(item.Summary) != 1 || item.Summary[0].Text != "**Looking up orders**\n\nThe user wants ORDER-7 and ORDER-8." {
				t.Errorf("reasoning item sent back as %s", it.Raw)
			}
		case "message":
			if it.Role == "assistant" && (item.Phase != "commentary" || it.Text != "I'll look both up.") {
				t.Errorf("commentary sent back as %s", it.Raw)
			}
		}
	}
	want := "message reasoning message function_call function_call function_call_output function_call_output"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("input %s, want %s", got, want)
	}
}

// A refusal part, streamed as refusal deltas or in the response, ends the
// run refused, with none of it streamed as text.
func TestRefusal(t *testing.T) {
	for _, run := range []func(testing.TB, provider.Provider, string) *runtest.Run{runtest.Once, runtest.Stream} {
		srv := fakemodel.NewOpenAI(fakemodel.Turn{Refusal: "I'm sorry, I can't assist with that."})
		r := run(t, model(srv, false), "hi")
		r.Ended(t, agentloop.StatusRefused, "refusal")
		if r.Text() != "" {
			t.Errorf("the refusal was streamed as text: %q", r.Text())
		}
		srv.Close()
	}
}
