package tggenkit_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"

	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// modelName is the scripted model's name in the fake plugin.
const modelName = "fake/scripted"

// script is the fake model: each request takes the next reply from its
// queue, and an empty queue answers with the text "done". It records every
// request it got.
type script struct {
	mu       sync.Mutex
	queue    []func() *ai.Message
	requests []*ai.ModelRequest
}

// push queues model replies: each is built afresh when taken, since Genkit
// writes refs into the reply it gets.
func (s *script) push(replies ...func() *ai.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

func (s *script) generate(_ context.Context, req *ai.ModelRequest, _ any, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	msg := ai.NewModelTextMessage("done")
	if len(s.queue) > 0 {
		msg = s.queue[0]()
		s.queue = s.queue[1:]
	}
	// As Genkit's plugins do, the response names its request: History is
	// read from it.
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
}

// lastRequest returns the latest request the model got.
func (s *script) lastRequest() *ai.ModelRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return frameworktest.Last(s.requests)
}

// fakePlugin is a Genkit plugin providing the scripted model.
type fakePlugin struct{ s *script }

func (p *fakePlugin) Name() string { return "fake" }

func (p *fakePlugin) Init(context.Context) []api.Action {
	m := ai.NewModelAction(modelName, &ai.ModelOptions{Label: "scripted",
		Supports: &ai.ModelSupports{Tools: true, Multiturn: true, SystemRole: true}}, p.s.generate)
	return []api.Action{m}
}

// newGenkit initializes Genkit with the fake plugin.
func newGenkit(ctx context.Context, s *script) *genkit.Genkit {
	return genkit.Init(ctx, genkit.WithPlugins(&fakePlugin{s: s}))
}

// generate runs one generation with the scripted model and the guard's
// middleware.
func generate(ctx context.Context, g *genkit.Genkit, gd *tggenkit.Guarded, opts ...ai.GenerateOption) (*ai.ModelResponse, error) {
	return genkit.Generate(ctx, g, append([]ai.GenerateOption{ai.WithModelName(modelName), ai.WithUse(gd)}, opts...)...)
}

// calls is a model reply with tool requests.
func calls(reqs ...*ai.ToolRequest) func() *ai.Message {
	b, _ := json.Marshal(reqs)
	return func() *ai.Message {
		var rs []*ai.ToolRequest
		_ = json.Unmarshal(b, &rs)
		parts := make([]*ai.Part, len(rs))
		for i, r := range rs {
			parts[i] = ai.NewToolRequestPart(r)
		}
		return ai.NewModelMessage(parts...)
	}
}

// toolResponses returns the tool responses among messages, in order.
func toolResponses(msgs []*ai.Message) []*ai.ToolResponse {
	var out []*ai.ToolResponse
	for _, m := range msgs {
		if m == nil {
			continue
		}
		for _, p := range m.Content {
			if p.IsToolResponse() {
				out = append(out, p.ToolResponse)
			}
		}
	}
	return out
}

// resultOf returns the model result of the tool response answering ref
// among the messages ("" for the last tool response).
func resultOf(t *testing.T, msgs []*ai.Message, ref string) *ai.ToolResponse {
	t.Helper()
	return frameworktest.Answer(t, "tool response for ref", toolResponses(msgs), ref, func(r *ai.ToolResponse) string { return r.Ref })
}
