package tggemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

var user = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}

func newModel(t *testing.T, srv *fakemodel.GeminiServer) *tggemini.Model {
	t.Helper()
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return tggemini.NewModel(client, tggemini.ModelOptions{Name: "scripted-model"})
}

func newLoop(t *testing.T, srv *fakemodel.GeminiServer, svc *orders.Service) *agentloop.Loop {
	t.Helper()
	return agentloop.New(newModel(t, srv), orders.Tools(svc), agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{})})
}

// stream runs the loop as a Stream and returns its events and error.
func stream(loop *agentloop.Loop, input string) ([]agentloop.Event, error) {
	var evs []agentloop.Event
	for ev, err := range loop.Stream(context.Background(), user, input) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// An error Gemini sends inside a stream (after its text began) ends the
// run failed, with the error's status as the reason, an EventEnd, and a
// provider.APIError the host can inspect; the text before it still
// streamed.
func TestStreamErrorEndsTheRunFailed(t *testing.T) {
	srv := fakemodel.NewGemini(fakemodel.Turn{Text: "Let me look that up",
		StreamError: &fakemodel.Error{Code: "429", Type: "RESOURCE_EXHAUSTED", Message: "Quota exceeded"}})
	defer srv.Close()
	evs, err := stream(newLoop(t, srv, orders.NewService()), "Where is ORDER-7?")
	var apiErr *provider.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "RESOURCE_EXHAUSTED" || apiErr.StatusCode != 200 || apiErr.Message != "Quota exceeded" {
		t.Fatalf("error %v (%#v), want a provider.APIError RESOURCE_EXHAUSTED inside a 200 stream", err, apiErr)
	}
	var end *agentloop.RunResult
	var text strings.Builder
	for _, ev := range evs {
		switch ev.Kind {
		case agentloop.EventEnd:
			end = ev.Run
		case agentloop.EventText:
			text.WriteString(ev.Text)
		}
	}
	if end == nil || end.Status != agentloop.StatusFailed || end.Reason != "RESOURCE_EXHAUSTED" {
		t.Fatalf("end %+v, want failed RESOURCE_EXHAUSTED", end)
	}
	if text.String() != "Let me look that up" {
		t.Errorf("streamed %q", text.String())
	}
}

// Vertex streams a call's arguments in pieces (partialArgs), closed by an
// empty functionCall: the pieces make one call, which runs once with the
// whole arguments, signed as the opening piece was, and the signature goes
// back (the fake refuses a request without it).
func TestStreamedArgumentsMakeOneCall(t *testing.T) {
	srv := fakemodel.NewGemini(
		fakemodel.Turn{StreamArgs: true, Calls: []fakemodel.Call{
			{CallID: "c1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`},
			{CallID: "c2", Name: "get_order", Arguments: `{"order_ref":"ORDER-8"}`},
		}},
		fakemodel.Turn{Text: "Found ORDER-7."},
	)
	defer srv.Close()
	svc := orders.NewService()
	evs, err := stream(newLoop(t, srv, svc), "Look up ORDER-7 and ORDER-8.")
	if err != nil {
		t.Fatal(err)
	}
	res := evs[len(evs)-1].Run
	if !srv.Requests()[0].Stream {
		t.Fatal("the first request did not stream")
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "Found ORDER-7." {
		t.Fatalf("%s %q\n%s", res.Status, res.Output, res.Transcript)
	}
	reqs := srv.Requests()
	rs := reqs[1].FunctionResponses()
	if len(rs) != 2 || rs[0].ID != "c1" || rs[1].ID != "c2" {
		t.Fatalf("function responses %+v", rs)
	}
	// ORDER-8 is another user's: NOT_FOUND, as if it did not exist.
	for i, want := range []guard.Code{guard.CodeOK, guard.CodeNotFound} {
		b, _ := json.Marshal(rs[i].Response)
		var r guard.Result
		if err := json.Unmarshal(b, &r); err != nil || r.Code != want || want == guard.CodeOK && !strings.Contains(string(r.Data), `"ORDER-7"`) {
			t.Errorf("response %d: %s (%v), want %s", i, b, err, want)
		}
	}
	model := reqs[1].Contents[1]
	if len(model.Parts) != 2 || model.Parts[0].FunctionCall == nil || model.Parts[0].FunctionCall.Args["order_ref"] != "ORDER-7" ||
		string(model.Parts[0].ThoughtSignature) != string(fakemodel.GeminiSignature(model.Parts[0])) {
		t.Errorf("the model turn sent back: %s", reqs[1].Body)
	}
}

// A reply Gemini ends otherwise than STOP never runs a call: a blocked
// prompt and SAFETY are refused, MAX_TOKENS incomplete, a bare
// UNEXPECTED_TOOL_CALL failed; a MALFORMED_FUNCTION_CALL or
// UNEXPECTED_TOOL_CALL that carries calls has each answered, unrun, and
// the run goes on so the model can call again.
func TestEndings(t *testing.T) {
	write := fakemodel.Call{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"duplicate"}`}
	for _, c := range []struct {
		name   string
		turn   fakemodel.Turn
		status agentloop.RunStatus
		reason string
		answer guard.Code // the code the unrun call got, 0 when the run ended
	}{
		{"blocked prompt", fakemodel.Turn{BlockReason: "PROHIBITED_CONTENT"}, agentloop.StatusRefused, "PROHIBITED_CONTENT", 0},
		{"safety", fakemodel.Turn{Calls: []fakemodel.Call{write}, Finish: "SAFETY"}, agentloop.StatusRefused, "SAFETY", 0},
		{"max tokens", fakemodel.Turn{Calls: []fakemodel.Call{write}, Finish: "MAX_TOKENS"}, agentloop.StatusIncomplete, "MAX_TOKENS", 0},
		{"unexpected, bare", fakemodel.Turn{Finish: "UNEXPECTED_TOOL_CALL"}, agentloop.StatusFailed, "UNEXPECTED_TOOL_CALL", 0},
		{"malformed with a call", fakemodel.Turn{Calls: []fakemodel.Call{write}, Finish: "MALFORMED_FUNCTION_CALL"}, agentloop.StatusCompleted, "", guard.CodeInvalidArguments},
		{"unexpected with a call", fakemodel.Turn{Calls: []fakemodel.Call{{Name: "list_files"}}, Finish: "UNEXPECTED_TOOL_CALL"}, agentloop.StatusCompleted, "", guard.CodeUnknownTool},
	} {
		for _, streamed := range []bool{false, true} {
			name := c.name
			if streamed {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				srv := fakemodel.NewGemini(c.turn, fakemodel.Turn{Text: "I could not do it."})
				defer srv.Close()
				svc := orders.NewService()
				loop := newLoop(t, srv, svc)
				var res *agentloop.RunResult
				var err error
				if streamed {
					var evs []agentloop.Event
					evs, err = stream(loop, "Refund ORDER-7.")
					if len(evs) > 0 {
						res = evs[len(evs)-1].Run
					}
				} else {
					res, err = loop.Run(context.Background(), user, "Refund ORDER-7.")
				}
				if err != nil || res == nil {
					t.Fatalf("%v %v", res, err)
				}
				if res.Status != c.status || res.Reason != c.reason {
					t.Fatalf("%s (%s), want %s (%s)\n%s", res.Status, res.Reason, c.status, c.reason, res.Transcript)
				}
				if svc.SideEffects() != 0 {
					t.Errorf("%d side effects", svc.SideEffects())
				}
				reqs := srv.Requests()
				if c.answer == 0 {
					if len(reqs) != 1 {
						t.Errorf("%d requests: the run went on", len(reqs))
					}
					return
				}
				rs := reqs[1].FunctionResponses()
				b, _ := json.Marshal(rs[0].Response)
				var r guard.Result
				if len(rs) != 1 || json.Unmarshal(b, &r) != nil || r.Code != c.answer {
					t.Errorf("the unrun call was answered %s", b)
				}
			})
		}
	}
}

// Ids: Gemini's own are kept; without one, a call's id is derived from the
// response id and its position, the same for the same response (so a
// replayed response is the same operation); without a response id either,
// there is none.
func TestCallIDs(t *testing.T) {
	resp := func(id string, calls ...*genai.FunctionCall) *genai.GenerateContentResponse {
		var ps []*genai.Part
		for _, c := range calls {
			ps = append(ps, &genai.Part{FunctionCall: c})
		}
		return &genai.GenerateContentResponse{ResponseID: id, Candidates: []*genai.Candidate{{Content: &genai.Content{Role: "model", Parts: ps}, FinishReason: "STOP"}}}
	}
	a := &genai.FunctionCall{Name: "get_order", Args: map[string]any{"order_ref": "ORDER-7"}}
	b := &genai.FunctionCall{Name: "get_order", Args: map[string]any{"order_ref": "ORDER-8"}}
	withID := &genai.FunctionCall{ID: "gem-1", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-9"}}

	calls := tggemini.Calls(resp("r1", a, withID, b), nil)
	if calls[0].ID != "r1/0" || calls[0].Kind != "derived-id" || calls[1].ID != "gem-1" || calls[1].Kind != "" || calls[2].ID != "r1/2" {
		t.Errorf("ids %+v", calls)
	}
	again := tggemini.Calls(resp("r1", a, withID, b), nil)
	if again[0].ID != calls[0].ID || again[2].ID != calls[2].ID {
		t.Errorf("the same response gave ids %s %s, then %s %s", calls[0].ID, calls[2].ID, again[0].ID, again[2].ID)
	}
	// A response without an id gives nothing to derive from: no id.
	if noID := tggemini.Calls(resp("", a, b), nil); noID[0].ID != "" || noID[1].ID != "" || noID[0].Kind != "" {
		t.Errorf("ids without a response id: %+v", noID)
	}
	c := tggemini.Call(user, "conversation-1", "r1", tggemini.Calls(resp("r1", a), nil)[0])
	if c.Context.CallID != "r1/0" || c.Context.ResponseID != "r1" || c.Context.Scope != "conversation-1" || c.Context.Provider != "gemini" {
		t.Errorf("call context %+v", c.Context)
	}
}

// The fake refuses what the real API refuses: a signed call sent back
// without its signature, and calls not answered one for one; so the
// adapter's passing tests mean something.
func TestFakeChecksTheConversation(t *testing.T) {
	srv := fakemodel.NewGemini(fakemodel.Turn{Text: "never"})
	defer srv.Close()
	m := newModel(t, srv)
	call := &genai.Part{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-7"}}}
	answer := tggemini.Output(provider.ToolCall{ID: "c1", Name: "get_order"}, &guard.Result{Code: guard.CodeOK})
	for name, contents := range map[string][]*genai.Content{
		"unsigned":   {genai.NewContentFromText("hi", genai.RoleUser), {Role: "model", Parts: []*genai.Part{call}}, tggemini.Outputs(answer)},
		"unanswered": {genai.NewContentFromText("hi", genai.RoleUser), {Role: "model", Parts: []*genai.Part{signed(call)}}, genai.NewContentFromText("and?", genai.RoleUser)},
	} {
		var items []json.RawMessage
		for _, c := range contents {
			items = append(items, kit.Item(c))
		}
		_, err := m.Turn(context.Background(), provider.Request{Items: items})
		var apiErr *provider.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "INVALID_ARGUMENT" {
			t.Errorf("%s: %v, want a 400 INVALID_ARGUMENT", name, err)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("a refused request consumed a turn")
	}
}

func signed(p *genai.Part) *genai.Part {
	s := *p
	s.ThoughtSignature = fakemodel.GeminiSignature(p)
	return &s
}

// A response Gemini sent without a responseId gets a random one from Model,
// a new one per response, and its calls ids derived from it; two such
// responses with the same call are two calls, and the read runs twice.
func TestResponseWithoutAnID(t *testing.T) {
	read := fakemodel.Call{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}
	srv := fakemodel.NewGemini(
		fakemodel.Turn{NoResponseID: true, Calls: []fakemodel.Call{read}},
		fakemodel.Turn{NoResponseID: true, Calls: []fakemodel.Call{read}},
		fakemodel.Turn{Text: "ORDER-7 is paid."},
	)
	defer srv.Close()
	res, err := newLoop(t, srv, orders.NewService()).Run(context.Background(), user, "Where is ORDER-7?")
	if err != nil || res.Status != agentloop.StatusCompleted {
		t.Fatalf("%v %v", res, err)
	}
	var ids []string
	for _, ev := range res.Transcript {
		if ev.Kind == agentloop.EventResult {
			ids = append(ids, ev.CallID)
			var r guard.Result
			if err := json.Unmarshal(ev.Result, &r); err != nil || r.Delivery != guard.DeliveryFresh {
				t.Errorf("call %s: %s", ev.CallID, ev.Result)
			}
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], "gemini-") || !strings.HasSuffix(ids[0], "/0") {
		t.Errorf("call ids %v", ids)
	}
}

type noteIn struct {
	Text string `json:"text"`
}

// earlyWorld is a loop over the orders tools and a write without approval
// (add_note), observing every event.
func earlyWorld(t *testing.T, srv *fakemodel.GeminiServer, observe func(agentloop.Event)) (*agentloop.Loop, *orders.Service, *atomic.Int32) {
	t.Helper()
	svc := orders.NewService()
	var notes atomic.Int32
	tools, err := orders.Tools(svc).With(toolset.Write("add_note", "Adds a note.", func(context.Context, *guard.Invocation, noteIn) (string, error) {
		notes.Add(1)
		return "noted", nil
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return agentloop.New(newModel(t, srv), tools, agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{}), Observer: observe}), svc, &notes
}

// A reply that ends cut short after a read ran early answers that read's
// result nowhere, and the transcript says so; nothing else runs.
func TestEarlyReadOfAReplyCutShort(t *testing.T) {
	srv := fakemodel.NewGemini(fakemodel.Turn{Finish: "MAX_TOKENS", Calls: []fakemodel.Call{
		{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`},
		{Name: "add_note", Arguments: `{"text":"cut"}`},
	}})
	defer srv.Close()
	loop, svc, notes := earlyWorld(t, srv, nil)
	evs, err := stream(loop, "Where is ORDER-7?")
	if err != nil {
		t.Fatal(err)
	}
	res := evs[len(evs)-1].Run
	if res.Status != agentloop.StatusIncomplete || notes.Load() != 0 || svc.Calls() != 1 {
		t.Fatalf("%s, %d notes, %d order calls\n%s", res.Status, notes.Load(), svc.Calls(), res.Transcript)
	}
	var unanswered int
	for _, e := range res.Transcript {
		if e.Kind == agentloop.EventUnanswered && e.Tool == "get_order" && strings.Contains(e.Text, "incomplete") {
			unanswered++
		}
	}
	if unanswered != 1 || len(srv.Requests()) != 1 {
		t.Errorf("%d unanswered events, %d requests\n%s", unanswered, len(srv.Requests()), res.Transcript)
	}
}
