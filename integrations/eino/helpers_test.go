package tgeino_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/refunddemo"
	"github.com/toolguard/toolguard/toolset"
)

// shop is the downstream system of the tests: orders per tenant, and the
// refund drafts created, counted.
type shop struct {
	mu     sync.Mutex
	owner  map[string]string // order ref -> tenant
	drafts []string          // downstream idempotency keys, one per draft created
	lose   int               // the next drafts whose reply is lost after they were made
}

func newShop() *shop {
	return &shop{owner: map[string]string{"ORDER-7": "acme", "ORDER-9": "globex"}}
}

func (s *shop) sideEffects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.drafts)
}

// The shop's tools take and give the refund example's types.
type (
	orderIn  = refunddemo.OrderIn
	refundIn = refunddemo.RefundIn
	order    = refunddemo.Order
	draft    = refunddemo.Draft
)

// tools declares the shop's tools: a read, and a write that needs approval
// when approval is set. Both fail closed for another tenant's order.
func (s *shop) tools(approval bool) *toolset.Set {
	owns := func(_ context.Context, inv *guard.Invocation, ref string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.owner[ref] != inv.Principal.TenantID {
			return guard.ErrNotFound
		}
		return nil
	}
	get := toolset.Read("get_order", "Look up one of the user's orders.",
		func(_ context.Context, _ *guard.Invocation, in orderIn) (order, error) {
			return order{OrderRef: in.OrderRef, Status: "paid"}, nil
		}, &toolset.Options[orderIn, order]{Authorize: func(ctx context.Context, inv *guard.Invocation, in orderIn) error {
			return owns(ctx, inv, in.OrderRef)
		}})
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order.",
		func(_ context.Context, inv *guard.Invocation, in refundIn) (draft, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.drafts = append(s.drafts, inv.IdempotencyKey)
			if s.lose > 0 {
				s.lose--
				return draft{}, guard.UnknownOutcome(errors.New("shop: the reply was lost"))
			}
			return draft{DraftID: fmt.Sprintf("DRAFT-%d", len(s.drafts)), OrderRef: in.OrderRef}, nil
		}, &toolset.Options[refundIn, draft]{NeedsApproval: approval, LoggedArguments: []string{"order_ref", "reason"},
			Receipt: func(_ context.Context, inv *guard.Invocation) (draft, bool, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for i, k := range s.drafts {
					if k == inv.IdempotencyKey {
						return draft{DraftID: fmt.Sprintf("DRAFT-%d", i+1)}, true, nil
					}
				}
				return draft{}, false, nil
			},
			Authorize: func(ctx context.Context, inv *guard.Invocation, in refundIn) error {
				return owns(ctx, inv, in.OrderRef)
			}})
	return toolset.MustNew(get, refund)
}

// script is a fake chat model implementing Eino's model interface: each
// Generate answers with the next scripted reply, given what the model has
// seen so far, and records every tool message it was sent.
type script struct {
	mu      sync.Mutex
	replies []func(seen []*schema.Message) *schema.Message
	turn    int
	tools   []*schema.ToolInfo
	results []*schema.Message // tool messages, in the order the model saw them first
	seen    map[string]bool
}

var _ model.ToolCallingChatModel = (*script)(nil)

func newScript(replies ...func([]*schema.Message) *schema.Message) *script {
	return &script{replies: replies, seen: map[string]bool{}}
}

// Generate implements model.BaseChatModel.
func (m *script) Generate(_ context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := model.GetCommonOptions(nil, opts...); o.Tools != nil {
		m.tools = o.Tools
	}
	for _, msg := range input {
		if msg.Role == schema.Tool {
			key := msg.ToolCallID + "\x00" + msg.Content
			if !m.seen[key] {
				m.seen[key] = true
				m.results = append(m.results, msg)
			}
		}
	}
	if m.turn >= len(m.replies) {
		return schema.AssistantMessage("done", nil), nil
	}
	r := m.replies[m.turn](input)
	m.turn++
	return r, nil
}

// Stream implements model.BaseChatModel.
func (m *script) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// WithTools implements model.ToolCallingChatModel.
func (m *script) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	m.mu.Lock()
	m.tools = tools
	m.mu.Unlock()
	return m, nil
}

// toolResults returns the model results the model was sent, decoded.
func (m *script) toolResults(t *testing.T) []guard.Result {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []guard.Result
	for _, msg := range m.results {
		r, err := host.ModelResult(msg.Content)
		if err != nil {
			t.Fatalf("tool message %q is not a model result: %v", msg.Content, err)
		}
		out = append(out, *r)
	}
	return out
}

// callTool is a scripted reply: one tool call with a fresh call id (a
// model's retry never reuses one).
func callTool(name, args string) func([]*schema.Message) *schema.Message {
	return func([]*schema.Message) *schema.Message {
		var id [6]byte
		_, _ = rand.Read(id[:])
		return schema.AssistantMessage("", []schema.ToolCall{{ID: fmt.Sprintf("call_%x", id), Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: args}}})
	}
}

func say(text string) func([]*schema.Message) *schema.Message {
	return func([]*schema.Message) *schema.Message { return schema.AssistantMessage(text, nil) }
}

// checkpoints is an in-memory Eino CheckPointStore whose contents a test
// can copy and put back, as a host whose process died would find them.
type checkpoints struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newCheckpoints() *checkpoints { return &checkpoints{m: map[string][]byte{}} }

// Get implements compose.CheckPointStore.
func (c *checkpoints) Get(_ context.Context, id string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok, nil
}

// Set implements compose.CheckPointStore.
func (c *checkpoints) Set(_ context.Context, id string, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = append([]byte(nil), b...)
	return nil
}

func (c *checkpoints) snapshot() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

func (c *checkpoints) restore(m map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = maps.Clone(m)
}

var acme = guard.Principal{TenantID: "acme", SubjectID: "user-1"}

// harness is an adk ChatModelAgent over the shop's tools behind the
// guard, run by a Runner with a checkpoint store.
type harness struct {
	shop   *shop
	model  *script
	store  *guard.MemStore
	cps    *checkpoints
	runner *adk.Runner
	signer *guard.Signer
}

func newHarness(t *testing.T, approval bool, m *script) *harness {
	return newHarnessWith(t, m, harnessOpts{approval: approval})
}

// harnessOpts vary the harness: approval makes the refund need one,
// streaming runs the agent in Eino's streaming mode, handler puts the guard in the agent's Handlers (an
// adk.ChatModelAgentMiddleware) instead of its ToolsNode middleware, and
// options adjusts tgeino's options.
type harnessOpts struct {
	approval, handler, streaming bool
	options                      func(set *toolset.Set, o *host.Options)
}

func newHarnessWith(t *testing.T, m *script, ho harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{shop: newShop(), model: m, store: guard.NewMemStore(guard.MemStoreOptions{}), cps: newCheckpoints()}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	h.signer, _ = guard.NewSigner(key)
	set := h.shop.tools(ho.approval)
	g := guard.New(set, h.store, guard.Options{Signer: h.signer})
	opts := host.Options{Signer: h.signer}
	if ho.options != nil {
		ho.options(set, &opts)
	}
	eg, err := tgeino.New(g, set, opts)
	if err != nil {
		t.Fatal(err)
	}
	conf := &adk.ChatModelAgentConfig{
		Name: "refunds", Description: "Refunds orders.", Instruction: "Help the user with their orders.",
		Model: m, ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: eg.ToolsNodeConfig()},
	}
	if ho.handler {
		conf.ToolsConfig.ToolCallMiddlewares = nil
		conf.Handlers = []adk.ChatModelAgentMiddleware{eg.AgentMiddleware()}
	}
	agent, err := adk.NewChatModelAgent(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	h.runner = adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: h.cps, EnableStreaming: ho.streaming})
	return h
}

// outcome is how one Run or Resume ended.
type outcome struct {
	interrupts []tgeino.Approval
	final      string
}

func drain(t *testing.T, it *adk.AsyncIterator[*adk.AgentEvent]) outcome {
	t.Helper()
	var o outcome
	for {
		ev, ok := it.Next()
		if !ok {
			return o
		}
		if ev.Err != nil {
			t.Fatalf("run failed: %v", ev.Err)
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			o.interrupts = append(o.interrupts, tgeino.Approvals(ev.Action.Interrupted.InterruptContexts)...)
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil {
			msg, err := ev.Output.MessageOutput.GetMessage()
			if err != nil {
				t.Fatalf("reading an event's message: %v", err)
			}
			if msg != nil && msg.Role == schema.Assistant && len(msg.ToolCalls) == 0 {
				o.final = msg.Content
			}
		}
	}
}

// run starts the run scope for acme, under checkpoint id scope.
func (h *harness) run(t *testing.T, scope, query string) outcome {
	t.Helper()
	ctx := host.WithScope(host.WithPrincipal(context.Background(), acme), scope)
	return drain(t, h.runner.Query(ctx, query, adk.WithCheckPointID(scope)))
}

// resume resumes run scope with the decisions, by interrupt id.
func (h *harness) resume(t *testing.T, scope string, decisions map[string]any) outcome {
	t.Helper()
	ctx := host.WithScope(host.WithPrincipal(context.Background(), acme), scope)
	it, err := h.runner.ResumeWithParams(ctx, scope, &adk.ResumeParams{Targets: decisions})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	return drain(t, it)
}
