package tgadk_test

import (
	"context"
	"iter"
	"sync"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// byUser is the tests' Options.Principal: the principal of the ADK user
// behind ctx, the ADK context of the tool call (an agent.Context); none
// for another context.
func byUser(ctx context.Context) (guard.Principal, error) {
	actx, ok := ctx.(agent.Context)
	if !ok {
		return guard.Principal{}, guard.ErrBadPrincipal
	}
	return principals[actx.UserID()], nil
}

// fakeModel is a model.LLM that answers from a queue: each request takes
// the next response, and an empty queue answers with a final text. It
// records every request it got.
type fakeModel struct {
	mu       sync.Mutex
	queue    []*genai.Content
	requests []*model.LLMRequest
}

var _ model.LLM = (*fakeModel)(nil)

func (m *fakeModel) Name() string { return "fake-model" }

func (m *fakeModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	var c *genai.Content
	if len(m.queue) > 0 {
		c, m.queue = m.queue[0], m.queue[1:]
	} else {
		c = genai.NewContentFromText("done", genai.RoleModel)
	}
	m.mu.Unlock()
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: c, TurnComplete: true}, nil)
	}
}

// push queues model replies.
func (m *fakeModel) push(cs ...*genai.Content) {
	m.mu.Lock()
	m.queue = append(m.queue, cs...)
	m.mu.Unlock()
}

// lastRequest returns the latest request the model got.
func (m *fakeModel) lastRequest() *model.LLMRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return frameworktest.Last(m.requests)
}

// calls is a model reply with function calls.
func calls(fcs ...*genai.FunctionCall) *genai.Content {
	c := &genai.Content{Role: genai.RoleModel}
	for _, fc := range fcs {
		c.Parts = append(c.Parts, &genai.Part{FunctionCall: fc})
	}
	return c
}

// newRunner returns an ADK runner over an llmagent with the guarded tools
// and the fake model, the integration's plugin installed, on an
// in-memory session service.
func newRunner(t testing.TB, a *tgadk.Guarded, m model.LLM) *runner.Runner {
	return newRunnerFor(t, a, llmagent.Config{Model: m, Instruction: "Help the user.", Tools: a.Tools()})
}

// newRunnerFor is newRunner with the agent's configuration given; an
// agent configured with callbacks of its own gets no plugin.
func newRunnerFor(t testing.TB, a *tgadk.Guarded, cfg llmagent.Config) *runner.Runner {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "agent"
	}
	ag, err := llmagent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var plugins []*plugin.Plugin
	if cfg.OnToolErrorCallbacks == nil && cfg.BeforeToolCallbacks == nil {
		p, err := a.Plugin()
		if err != nil {
			t.Fatal(err)
		}
		plugins = append(plugins, p)
	}
	r, err := runner.New(runner.Config{AppName: "tgadk-test", Agent: ag, SessionService: session.InMemoryService(),
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: plugins}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs one user turn (a text, or a content such as a confirmation
// response) and returns its events.
func run(t testing.TB, r *runner.Runner, user, sess string, msg *genai.Content) []*session.Event {
	t.Helper()
	var evs []*session.Event
	for ev, err := range r.Run(t.Context(), user, sess, msg, agent.RunConfig{}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// responses returns the function responses in the events, in order.
func responses(evs []*session.Event) []*genai.FunctionResponse {
	var out []*genai.FunctionResponse
	for _, ev := range evs {
		if ev == nil || ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionResponse != nil {
				out = append(out, p.FunctionResponse)
			}
		}
	}
	return out
}

// confirmationCalls returns the adk_request_confirmation calls in the
// events, in order.
func confirmationCalls(evs []*session.Event) []*genai.FunctionCall {
	var out []*genai.FunctionCall
	for _, ev := range evs {
		if ev == nil || ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionCall != nil && p.FunctionCall.Name == "adk_request_confirmation" {
				out = append(out, p.FunctionCall)
			}
		}
	}
	return out
}

// confirmationCall returns the first adk_request_confirmation call in the
// events, or nil.
func confirmationCall(evs []*session.Event) *genai.FunctionCall {
	if cs := confirmationCalls(evs); len(cs) > 0 {
		return cs[0]
	}
	return nil
}

// confirm is the client's answer to a confirmation call.
func confirm(fc *genai.FunctionCall, yes bool) *genai.Content {
	return &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		ID: fc.ID, Name: fc.Name, Response: map[string]any{"confirmed": yes}}}}}
}
