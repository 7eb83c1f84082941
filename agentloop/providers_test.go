package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/genai"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	tgchat "github.com/toolguard/toolguard/adapters/chat"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// step is one scripted model reply, written once for every provider.
type step struct {
	text  string
	calls []stepCall
	// end makes the reply end abnormally: "truncated" or "refused".
	end string
}

type stepCall struct{ id, name, args string }

// fake is one provider's fake server, played through its real SDK client.
type fake struct {
	name string
	// model returns a provider talking to the server.
	model func() provider.Provider
	// results returns the model results the loop sent in each answered
	// request, in order.
	results func() [][]guard.Result
	// answered counts the requests the server answered with 200.
	answered func() int
	// bodies are the raw bodies of the requests the server answered with
	// 200, in order.
	bodies func() []string
	close  func()
}

// providers are the fakes, each about to play the steps: the Responses
// API chained and stateless, Chat Completions, Anthropic Messages, and
// Gemini with call ids (Gemini 3) and without (2.x, Vertex AI).
var providers = []string{"responses", "responses-stateless", "chat", "anthropic", "gemini", "gemini-noids"}

func newFake(t *testing.T, name string, steps ...step) *fake {
	t.Helper()
	f := &fake{name: name}
	switch name {
	case "responses", "responses-stateless":
		var turns []fakemodel.Turn
		for _, s := range steps {
			turn := fakemodel.Turn{Text: s.text, Reasoning: "thinking about " + s.text}
			for _, c := range s.calls {
				turn.Calls = append(turn.Calls, fakemodel.Call{CallID: c.id, Name: c.name, Arguments: c.args})
			}
			switch s.end {
			case "truncated":
				turn.Finish = "max_output_tokens"
			case "refused":
				turn.Finish = "content_filter"
			}
			turns = append(turns, turn)
		}
		srv := fakemodel.NewOpenAI(turns...)
		client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(2))
		stateless := name == "responses-stateless"
		f.model = func() provider.Provider {
			return tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model", Stateless: stateless})
		}
		f.results = func() [][]guard.Result {
			var out [][]guard.Result
			for _, r := range okRequests(srv) {
				// The outputs that end the input: those of the last
				// response (a stateless request carries the earlier ones
				// too).
				var last []fakemodel.OpenAIInput
				for _, it := range r.Input {
					if it.Type != "function_call_output" {
						last = nil
						continue
					}
					last = append(last, it)
				}
				out = append(out, decodeResults(t, last, func(it fakemodel.OpenAIInput) string { return it.Output }))
			}
			return out
		}
		f.answered = func() int { return len(okRequests(srv)) }
		f.bodies = func() []string {
			return rawBodies(okRequests(srv), func(r fakemodel.OpenAIRequest) []byte { return r.Body })
		}
		f.close = srv.Close
	case "chat":
		var turns []fakemodel.Turn
		for _, s := range steps {
			turn := fakemodel.Turn{Text: s.text}
			for _, c := range s.calls {
				turn.Calls = append(turn.Calls, fakemodel.Call{CallID: c.id, Name: c.name, Arguments: c.args})
			}
			switch s.end {
			case "truncated":
				turn.Finish = "length"
			case "refused":
				turn.Finish = "content_filter"
			}
			turns = append(turns, turn)
		}
		srv := fakemodel.NewChat(turns...)
		client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(2))
		f.model = func() provider.Provider {
			return tgchat.NewModel(client, tgchat.ModelOptions{Name: "scripted-model"})
		}
		ok200 := func() []fakemodel.ChatRequest {
			return answered(srv.Requests(), func(r fakemodel.ChatRequest) int { return r.StatusCode })
		}
		f.results = func() [][]guard.Result {
			var out [][]guard.Result
			for _, r := range ok200() {
				out = append(out, decodeResults(t, r.ToolResults(), func(m fakemodel.ChatMessage) string { return m.Content }))
			}
			return out
		}
		f.answered = func() int { return len(ok200()) }
		f.bodies = func() []string { return rawBodies(ok200(), func(r fakemodel.ChatRequest) []byte { return r.Body }) }
		f.close = srv.Close
	case "anthropic":
		var turns []fakemodel.Turn
		for _, s := range steps {
			turn := fakemodel.Turn{Text: s.text}
			for _, c := range s.calls {
				turn.Calls = append(turn.Calls, fakemodel.Call{CallID: c.id, Name: c.name, Arguments: c.args})
			}
			switch s.end {
			case "truncated":
				turn.Finish = "max_tokens"
			case "refused":
				turn.Finish = "refusal"
			}
			turns = append(turns, turn)
		}
		srv := fakemodel.NewAnthropic(turns...)
		client := sdk.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey("test"), aoption.WithMaxRetries(2))
		f.model = func() provider.Provider {
			return tganthropic.NewModel(client, tganthropic.ModelOptions{Name: "scripted-model"})
		}
		ok200 := func() []fakemodel.AnthropicRequest {
			return answered(srv.Requests(), func(r fakemodel.AnthropicRequest) int { return r.StatusCode })
		}
		f.results = func() [][]guard.Result {
			var out [][]guard.Result
			for _, r := range ok200() {
				res := decodeResults(t, r.ToolResults(), func(tr fakemodel.AnthropicToolResult) string { return tr.Content })
				for i, tr := range r.ToolResults() {
					if tr.IsError != (res[i].Code != guard.CodeOK) {
						t.Errorf("tool_result %s: is_error %v for code %s", tr.ToolUseID, tr.IsError, res[i].Code)
					}
				}
				out = append(out, res)
			}
			return out
		}
		f.answered = func() int { return len(ok200()) }
		f.bodies = func() []string {
			return rawBodies(ok200(), func(r fakemodel.AnthropicRequest) []byte { return r.Body })
		}
		f.close = srv.Close
	case "gemini", "gemini-noids":
		var turns []fakemodel.Turn
		for _, s := range steps {
			turn := fakemodel.Turn{Text: s.text}
			for _, c := range s.calls {
				id := c.id
				if name == "gemini-noids" {
					id = ""
				}
				turn.Calls = append(turn.Calls, fakemodel.Call{CallID: id, Name: c.name, Arguments: c.args})
			}
			switch s.end {
			case "truncated":
				turn.Finish = "MAX_TOKENS"
			case "refused":
				turn.Finish = "SAFETY"
			}
			turns = append(turns, turn)
		}
		srv := fakemodel.NewGemini(turns...)
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
		if err != nil {
			t.Fatal(err)
		}
		f.model = func() provider.Provider {
			return tggemini.NewModel(client, tggemini.ModelOptions{Name: "scripted-model"})
		}
		ok200 := func() []fakemodel.GeminiRequest {
			return answered(srv.Requests(), func(r fakemodel.GeminiRequest) int { return r.StatusCode })
		}
		f.results = func() [][]guard.Result {
			var out [][]guard.Result
			for _, r := range ok200() {
				out = append(out, decodeResults(t, r.FunctionResponses(), func(fr *genai.FunctionResponse) string {
					b, _ := json.Marshal(fr.Response)
					return string(b)
				}))
			}
			return out
		}
		f.answered = func() int { return len(ok200()) }
		f.bodies = func() []string { return rawBodies(ok200(), func(r fakemodel.GeminiRequest) []byte { return r.Body }) }
		f.close = srv.Close
	default:
		t.Fatalf("no fake %s", name)
	}
	t.Cleanup(f.close)
	return f
}

// rawBodies are the requests' bodies as text.
func rawBodies[R any](reqs []R, body func(R) []byte) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = string(body(r))
	}
	return out
}

// answered returns the requests a fake answered with 200.
func answered[R any](reqs []R, status func(R) int) []R {
	var out []R
	for _, r := range reqs {
		if status(r) == 200 {
			out = append(out, r)
		}
	}
	return out
}

func decodeResults[T any](t *testing.T, items []T, text func(T) string) []guard.Result {
	t.Helper()
	out := []guard.Result{}
	for _, it := range items {
		var r guard.Result
		if err := json.Unmarshal([]byte(text(it)), &r); err != nil {
			t.Fatalf("a tool result is not a model result: %v: %s", err, text(it))
		}
		out = append(out, r)
	}
	return out
}

// refundSteps read the order, draft the refund, ask for it again with the
// arguments in another order, and end.
var refundSteps = []step{
	{calls: []stepCall{{"call_r", readTool, readArgs}}},
	{text: "ORDER-7 is paid; drafting the refund.", calls: []stepCall{{"call_w", refundTool, refundArgs}}},
	{calls: []stepCall{{"call_w2", refundTool, `{"reason":"duplicate","order_ref":"ORDER-7"}`}}},
	{text: "Refund draft DRAFT-1 is created."},
}

// Every provider runs the same loop: the same transcript, one side effect,
// the repeat replayed, the results carried in the provider's own tool
// result shape, and the adapter named in every audit record.
func TestEveryProviderRefunds(t *testing.T) {
	var transcripts []string
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name, refundSteps...)
			svc := orders.NewService()
			_, rdb := redistest.Mini(t)
			loop := agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Store: idemStore(t, rdb), Approver: &approver{}})
			res, err := loop.Run(testCtx(t), user1, "Refund my duplicate order ORDER-7.")
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != agentloop.StatusCompleted || res.Output != "Refund draft DRAFT-1 is created." || res.Turns != 4 {
				t.Fatalf("status %s output %q turns %d\n%s", res.Status, res.Output, res.Turns, res.Transcript)
			}
			if svc.SideEffects() != 1 {
				t.Errorf("%d side effects", svc.SideEffects())
			}
			got := f.results()
			if len(got) != 4 || len(got[1]) != 1 || len(got[2]) != 1 || len(got[3]) != 1 ||
				got[1][0].Code != guard.CodeOK || got[2][0].Delivery != guard.DeliveryFresh || got[3][0].Delivery != guard.DeliveryLocalReplay {
				t.Fatalf("results sent %+v", got)
			}
			recs, _, err := loop.Store().Audit(testCtx(t), user1.TenantID, 0, 100)
			if err != nil || len(recs) != 4 { // the read, the write asking for approval, the write, its replay
				t.Fatalf("audit %d records, %v", len(recs), err)
			}
			info := loop.Provider()
			for _, r := range recs {
				var body guard.AuditBody
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatal(err)
				}
				if c := body.Context; c.Provider != info.Provider || c.APIFamily != info.APIFamily || c.AdapterRevision != info.Revision || info.Revision == "" {
					t.Errorf("audit context %+v, provider %+v", c, info)
				}
			}
			transcripts = append(transcripts, res.Transcript.String())
		})
	}
	for i := 1; i < len(transcripts); i++ {
		got, want := transcripts[i], transcripts[0]
		if strings.HasPrefix(providers[i], "gemini") {
			// genai hands a call's arguments over decoded (FunctionCall.Args
			// is a map), so the model's member order is not kept.
			got, want = sortedArgs(t, got), sortedArgs(t, want)
		}
		if got != want {
			t.Errorf("%s transcript differs from %s:\n%s\n%s", providers[i], providers[0], got, want)
		}
	}
}

// sortedArgs rewrites the arguments of every "calls" line of a transcript
// with their members sorted.
func sortedArgs(t *testing.T, transcript string) string {
	lines := strings.Split(transcript, "\n")
	for i, l := range lines {
		head, args, ok := strings.Cut(l, " {")
		if !ok || !strings.Contains(head, " calls ") {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte("{"+args), &v); err != nil {
			t.Fatalf("transcript line %q: %v", l, err)
		}
		b, _ := json.Marshal(v)
		lines[i] = head + " " + string(b)
	}
	return strings.Join(lines, "\n")
}

// A reply cut short or refused ends the run with a status the host can
// test, never completed, and the calls it carried do not run.
func TestEveryProviderEndsHonestly(t *testing.T) {
	for _, name := range providers {
		for _, end := range []string{"truncated", "refused"} {
			t.Run(name+"/"+end, func(t *testing.T) {
				f := newFake(t, name,
					step{calls: []stepCall{{"call_r", readTool, readArgs}}},
					step{text: "Drafting", calls: []stepCall{{"call_w", refundTool, refundArgs}}, end: end})
				svc := orders.NewService()
				loop := agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Approver: &approver{}})
				for _, stream := range []bool{false, true} {
					var res *agentloop.RunResult
					var err error
					if stream {
						f = newFake(t, name,
							step{calls: []stepCall{{"call_r", readTool, readArgs}}},
							step{text: "Drafting", calls: []stepCall{{"call_w", refundTool, refundArgs}}, end: end})
						loop = agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Approver: &approver{}})
						res, err = collect(t, loop.Stream(testCtx(t), user1, "refund"))
					} else {
						res, err = loop.Run(testCtx(t), user1, "refund")
					}
					if err != nil {
						t.Fatal(err)
					}
					want := agentloop.StatusIncomplete
					if end == "refused" {
						want = agentloop.StatusRefused
					}
					if res.Status != want || res.Reason == "" || res.Turns != 2 {
						t.Errorf("stream %v: status %s reason %q turns %d", stream, res.Status, res.Reason, res.Turns)
					}
					if svc.SideEffects() != 0 || strings.Contains(res.Transcript.String(), "guard:     create_refund_draft") {
						t.Errorf("stream %v: the cut reply's call ran:\n%s", stream, res.Transcript)
					}
				}
			})
		}
	}
}

// collect drains a stream, checking its shape: text deltas arrive before
// the end and add up to the messages, each call is yielded before its
// result, and the end carries the result.
func collect(t *testing.T, events func(func(agentloop.Event, error) bool), calledBefore ...string) (*agentloop.RunResult, error) {
	t.Helper()
	var res *agentloop.RunResult
	var deltas, messages strings.Builder
	called := map[string]bool{}
	for _, id := range calledBefore { // a resumed run answers calls made before the pause
		called[id] = true
	}
	for e, err := range events {
		if err != nil {
			return res, err
		}
		if res != nil {
			t.Fatalf("event %s after the end", e.Kind)
		}
		switch e.Kind {
		case agentloop.EventText:
			deltas.WriteString(e.Text)
		case agentloop.EventMessage:
			messages.WriteString(e.Text)
		case agentloop.EventCall:
			called[e.CallID] = true
		case agentloop.EventResult:
			if !called[e.CallID] {
				t.Errorf("result of %s before its call", e.CallID)
			}
		case agentloop.EventEnd:
			res = e.Run
			if res == nil || string(res.Status) != e.Text {
				t.Fatalf("end event %+v", e)
			}
		}
	}
	if res == nil {
		t.Fatal("the stream did not end with EventEnd")
	}
	if deltas.String() != messages.String() || deltas.Len() == 0 {
		t.Errorf("text deltas %q, messages %q", deltas.String(), messages.String())
	}
	return res, nil
}

// Streaming through each real SDK client: the text arrives in deltas
// before the run ends, and the run is the same as Run's.
func TestEveryProviderStreams(t *testing.T) {
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name, refundSteps...)
			svc := orders.NewService()
			loop := agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Approver: &approver{}})
			var deltas int
			var sawEnd bool
			for e, err := range loop.Stream(testCtx(t), user1, "Refund my duplicate order ORDER-7.") {
				if err != nil {
					t.Fatal(err)
				}
				switch e.Kind {
				case agentloop.EventText:
					if sawEnd {
						t.Error("a text delta after the end")
					}
					deltas++
				case agentloop.EventEnd:
					sawEnd = true
				}
			}
			if deltas < 4 || !sawEnd {
				t.Errorf("%d text deltas, end %v", deltas, sawEnd)
			}
			res, err := collect(t, agentloop.New(newFake(t, name, refundSteps...).model(), orders.Tools(orders.NewService()),
				agentloop.Options{Approver: &approver{}}).Stream(testCtx(t), user1, "refund"))
			if err != nil || res.Status != agentloop.StatusCompleted || res.Output != "Refund draft DRAFT-1 is created." {
				t.Fatalf("streamed run: %v %+v", err, res)
			}
		})
	}
}

// Breaking out of a stream stops the run: no further request is sent.
func TestStreamBreakStopsTheRun(t *testing.T) {
	f := newFake(t, "chat", refundSteps...)
	loop := agentloop.New(f.model(), orders.Tools(orders.NewService()), agentloop.Options{Approver: &approver{}})
	for e := range loop.Stream(context.Background(), user1, "refund") {
		if e.Kind == agentloop.EventResult {
			break
		}
	}
	if n := f.answered(); n != 1 {
		t.Errorf("%d requests after breaking at the first result", n)
	}
}

// A run whose provider keeps nothing pauses, is saved as JSON, and resumes
// in a new loop against a new fake server that never saw the run: the
// state carries the whole conversation (for Responses, store false with
// the encrypted reasoning items, which the fake checks).
func TestStatelessResumeElsewhere(t *testing.T) {
	steps := []step{
		{text: "Reading.", calls: []stepCall{{"call_r", readTool, readArgs}}},
		{text: "Drafting.", calls: []stepCall{{"call_w", refundTool, refundArgs}}},
		{text: "Refund draft DRAFT-1 is created."},
	}
	for _, name := range []string{"responses-stateless", "chat", "anthropic"} {
		t.Run(name, func(t *testing.T) {
			svc := orders.NewService()
			_, rdb := redistest.Mini(t)
			signer, err := guard.NewSigner([]byte("a key shared by both processes, 32+ bytes"))
			if err != nil {
				t.Fatal(err)
			}
			first := agentloop.New(newFake(t, name, steps[:2]...).model(), orders.Tools(svc), agentloop.Options{Store: idemStore(t, rdb), Signer: signer})
			res, err := first.Run(testCtx(t), user1, "Refund my duplicate order ORDER-7.")
			if err != nil || res.Status != agentloop.StatusPaused {
				t.Fatalf("%v %+v", err, res)
			}
			saved, err := res.State.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if res.State.Chain != "" || len(res.State.Items) == 0 {
				t.Fatalf("the state does not carry the conversation: chain %q, %d items", res.State.Chain, len(res.State.Items))
			}

			// Another process: a new loop, a new server that keeps nothing.
			f := newFake(t, name, steps[2:]...)
			second := agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Store: idemStore(t, rdb), Signer: signer})
			st, err := agentloop.LoadState(saved)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := second.Grant(st.Pending[0], "ann")
			if err != nil {
				t.Fatal(err)
			}
			approval := agentloop.Approval{CallID: st.Pending[0].CallID, Grant: tok}
			if name == "anthropic" { // the same, streamed
				res, err = collect(t, second.ResumeStream(testCtx(t), user1, st, approval), st.Pending[0].CallID)
			} else {
				res, err = second.Resume(testCtx(t), user1, st, approval)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != agentloop.StatusCompleted || res.Output != "Refund draft DRAFT-1 is created." || svc.SideEffects() != 1 {
				t.Fatalf("resumed: %s %q, %d side effects\n%s", res.Status, res.Output, svc.SideEffects(), res.Transcript)
			}
			if got := f.results(); len(got) != 1 || len(got[0]) != 1 || got[0][0].Code != guard.CodeOK {
				t.Errorf("results sent after resuming %+v", got)
			}
		})
	}
}

// stateBound is the most a paused run's JSON state may weigh after 12
// turns of the scripted model (11 reads, then a write that waits): the
// conversation, the transcript and the pending request, each once.
const stateBound = 16 << 10

// The state of a 12-turn run stays within stateBound for every provider;
// the sizes are logged (go test -v -run StateSize ./agentloop/).
func TestStateSize(t *testing.T) {
	var steps []step
	for i := range 11 {
		steps = append(steps, step{text: "Checking the order again.", calls: []stepCall{{fmt.Sprintf("call_%d", i), readTool, readArgs}}})
	}
	steps = append(steps, step{text: "Drafting.", calls: []stepCall{{"call_w", refundTool, refundArgs}}})
	for _, name := range providers {
		f := newFake(t, name, steps...)
		loop := agentloop.New(f.model(), orders.Tools(orders.NewService()), agentloop.Options{})
		res, err := loop.Run(testCtx(t), user1, "Refund my duplicate order ORDER-7.")
		if err != nil || res.Status != agentloop.StatusPaused || res.Turns != 12 {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		b, _ := res.State.Marshal()
		t.Logf("%s: state of a 12-turn run: %d bytes (%d conversation items)", name, len(b), len(res.State.Items))
		if len(b) > stateBound {
			t.Errorf("%s: state %d bytes, bound %d", name, len(b), stateBound)
		}
	}
}

// Calls that are not plain function calls are answered, never run and
// never dropped (contract section 3): a namespaced call never runs the
// top-level tool of its name, a custom tool call and a call the provider
// marked incomplete are refused, and each provider accepts the answers.
func TestCallsThatMustNotRun(t *testing.T) {
	type want struct {
		id   string
		code guard.Code
	}
	cases := []struct {
		name  string
		build func() (provider.Provider, func() []guard.Result)
		want  []want
	}{
		{"responses", func() (provider.Provider, func() []guard.Result) {
			srv := fakemodel.NewOpenAI(fakemodel.Turn{Calls: []fakemodel.Call{
				{CallID: "c_ns", Namespace: "billing", Name: refundTool, Arguments: refundArgs},
				{CallID: "c_custom", Name: refundTool, Arguments: "refund ORDER-7", Custom: true},
				{CallID: "c_partial", Name: refundTool, Arguments: `{"order_ref":"ORD`, Status: "incomplete"},
				{CallID: "c_ok", Name: readTool, Arguments: readArgs},
			}}, fakemodel.Turn{Text: "ok"})
			t.Cleanup(srv.Close)
			results := func() []guard.Result {
				req := srv.Requests()[1]
				var out []guard.Result
				for _, it := range req.Input {
					if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
						out = append(out, decodeResults(t, []string{it.Output}, func(s string) string { return s })...)
					}
				}
				return out
			}
			return model(newClient(srv)), results
		}, []want{{"c_ns", guard.CodeUnknownTool}, {"c_custom", guard.CodeUnknownTool}, {"c_partial", guard.CodeInvalidArguments}, {"c_ok", guard.CodeOK}}},
		{"chat", func() (provider.Provider, func() []guard.Result) {
			srv := fakemodel.NewChat(fakemodel.Turn{Calls: []fakemodel.Call{
				{CallID: "c_custom", Name: refundTool, Arguments: "refund ORDER-7", Custom: true},
				{CallID: "c_ok", Name: readTool, Arguments: readArgs},
			}}, fakemodel.Turn{Text: "ok"})
			t.Cleanup(srv.Close)
			client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))
			return tgchat.NewModel(client, tgchat.ModelOptions{}), func() []guard.Result {
				return decodeResults(t, srv.Requests()[1].ToolResults(), func(m fakemodel.ChatMessage) string { return m.Content })
			}
		}, []want{{"c_custom", guard.CodeUnknownTool}, {"c_ok", guard.CodeOK}}},
		{"anthropic", func() (provider.Provider, func() []guard.Result) {
			srv := fakemodel.NewAnthropic(fakemodel.Turn{Calls: []fakemodel.Call{
				{CallID: "c_ns", Toolset: "billing", Name: refundTool, Arguments: refundArgs},
				{CallID: "c_ok", Name: readTool, Arguments: readArgs},
			}}, fakemodel.Turn{Text: "ok"})
			t.Cleanup(srv.Close)
			client := sdk.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey("test"))
			return tganthropic.NewModel(client, tganthropic.ModelOptions{}), func() []guard.Result {
				return decodeResults(t, srv.Requests()[1].ToolResults(), func(r fakemodel.AnthropicToolResult) string { return r.Content })
			}
		}, []want{{"c_ns", guard.CodeUnknownTool}, {"c_ok", guard.CodeOK}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, results := c.build()
			svc := orders.NewService()
			loop := agentloop.New(p, orders.Tools(svc), agentloop.Options{Approver: &approver{}})
			res, err := loop.Run(testCtx(t), user1, "refund")
			if err != nil || res.Status != agentloop.StatusCompleted {
				t.Fatalf("%v %+v", err, res)
			}
			got := results()
			if len(got) != len(c.want) {
				t.Fatalf("%d answers for %d calls: %+v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				if got[i].Code != w.code {
					t.Errorf("%s answered %s, want %s", w.id, got[i].Code, w.code)
				}
			}
			if svc.SideEffects() != 0 {
				t.Errorf("%d side effects: a call that must not run ran", svc.SideEffects())
			}
		})
	}
}

// Telemetry names the provider that ran: every model turn's span carries
// gen_ai.provider.name and the response id, under the run's span.
func TestEveryProviderTraced(t *testing.T) {
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			f := newFake(t, name, refundSteps...)
			loop := agentloop.New(f.model(), orders.Tools(orders.NewService()), agentloop.Options{Approver: &approver{}, TracerProvider: tp})
			if _, err := loop.Run(testCtx(t), user1, "refund"); err != nil {
				t.Fatal(err)
			}
			turns := 0
			for _, sp := range rec.Ended() {
				if sp.Name() != "chat scripted-model" {
					continue
				}
				turns++
				attrs := map[string]string{}
				for _, kv := range sp.Attributes() {
					attrs[string(kv.Key)] = kv.Value.Emit()
				}
				if attrs["gen_ai.provider.name"] != loop.Provider().Provider || attrs["gen_ai.response.id"] == "" {
					t.Errorf("turn span attributes %v", attrs)
				}
			}
			if turns != 4 {
				t.Errorf("%d turn spans, want 4", turns)
			}
		})
	}
}

// Each provider's Params hook sets request fields the loop knows nothing
// of, and they reach the wire.
func TestParamsHookReachesTheWire(t *testing.T) {
	ctx := testCtx(t)
	tools := orders.Tools(orders.NewService())

	rsrv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "ok"})
	t.Cleanup(rsrv.Close)
	rmodel := tgopenai.NewModel(newClient(rsrv), tgopenai.ModelOptions{Params: func(p *responses.ResponseNewParams) {
		p.ParallelToolCalls = oai.Bool(false)
		p.MaxOutputTokens = oai.Int(321)
	}})

	csrv := fakemodel.NewChat(fakemodel.Turn{Text: "ok"})
	t.Cleanup(csrv.Close)
	cmodel := tgchat.NewModel(oai.NewClient(option.WithBaseURL(csrv.BaseURL()), option.WithAPIKey("test")),
		tgchat.ModelOptions{Params: func(p *oai.ChatCompletionNewParams) {
			p.ParallelToolCalls = oai.Bool(false)
			p.MaxCompletionTokens = oai.Int(321)
		}})

	asrv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "ok"})
	t.Cleanup(asrv.Close)
	amodel := tganthropic.NewModel(sdk.NewClient(aoption.WithBaseURL(asrv.BaseURL()), aoption.WithAPIKey("test")),
		tganthropic.ModelOptions{MaxTokens: 321, Params: func(p *sdk.MessageNewParams) {
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: sdk.Bool(true)}}
		}})

	gsrv := fakemodel.NewGemini(fakemodel.Turn{Text: "ok"})
	t.Cleanup(gsrv.Close)
	gclient, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gsrv.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	gmodel := tggemini.NewModel(gclient, tggemini.ModelOptions{Config: func(c *genai.GenerateContentConfig) {
		c.MaxOutputTokens = 321
		c.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny}}
	}})

	for _, c := range []struct {
		model provider.Provider
		body  func() []byte
		want  []string
	}{
		{rmodel, func() []byte { return rsrv.Requests()[0].Body }, []string{`"parallel_tool_calls":false`, `"max_output_tokens":321`}},
		{cmodel, func() []byte { return csrv.Requests()[0].Body }, []string{`"parallel_tool_calls":false`, `"max_completion_tokens":321`}},
		{amodel, func() []byte { return asrv.Requests()[0].Body }, []string{`"disable_parallel_tool_use":true`, `"max_tokens":321`}},
		{gmodel, func() []byte { return gsrv.Requests()[0].Body }, []string{`"maxOutputTokens":321`, `"mode":"ANY"`}},
	} {
		loop := agentloop.New(c.model, tools, agentloop.Options{})
		if _, err := loop.Run(ctx, user1, "hi"); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(c.body()), w) {
				t.Errorf("%s: the request lacks %s: %s", loop.Provider().APIFamily, w, c.body())
			}
		}
	}
}

// The status tool settles an unknown outcome whichever provider runs: the
// write's reply is lost, the model asks for its operation's status, and
// the answer is the receipt, once.
func TestEveryProviderStatusTool(t *testing.T) {
	const runID = "run-status"
	op, _ := guard.ScopeIDs(runID, guard.Fingerprint(refundTool, []byte(refundArgs)))
	statusArgs, _ := json.Marshal(toolset.StatusInput{OperationID: op})
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name,
				step{calls: []stepCall{{"call_w", refundTool, refundArgs}}},
				step{text: "Checking.", calls: []stepCall{{"call_s", toolset.StatusToolName, string(statusArgs)}}},
				step{text: "Confirmed."})
			svc := orders.NewService()
			svc.FailNext(orders.FailAfterCommit)
			loop := agentloop.New(f.model(), orders.Tools(svc), agentloop.Options{Approver: &approver{}})
			res, err := loop.Run(testCtx(t), user1, "refund", agentloop.RunOptions{RunID: runID})
			if err != nil || res.Status != agentloop.StatusCompleted {
				t.Fatalf("%v %+v", err, res)
			}
			got := f.results()
			if len(got) != 3 || got[1][0].Code != guard.CodeOutcomeUnknown || got[1][0].OperationID != op ||
				got[2][0].Code != guard.CodeOK || got[2][0].Delivery != guard.DeliveryReceiptReconciled {
				t.Fatalf("results %+v\n%s", got, res.Transcript)
			}
			if svc.SideEffects() != 1 {
				t.Errorf("%d side effects", svc.SideEffects())
			}
		})
	}
}
