package tgeino_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/toolset"
)

type sendIn struct {
	To   string `json:"to" jsonschema:"description=Who gets the message"`
	Text string `json:"text"`
}

type sendOut struct {
	Sent bool `json:"sent"`
}

type notesIn struct {
	Topic string `json:"topic"`
}

// mailbox is what Eino's own tools of the tests act on.
type mailbox struct {
	mu   sync.Mutex
	sent []string // downstream keys
	read int
}

// einoTools are Eino's own tools, built with Eino's utils: a write that
// sends a message (invokable) and a read that streams notes.
func (mb *mailbox) einoTools(t *testing.T) (tool.InvokableTool, tool.StreamableTool) {
	t.Helper()
	send, err := utils.InferTool("send_message", "Send a message.", func(ctx context.Context, in sendIn) (sendOut, error) {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		inv := host.InvocationFrom(ctx)
		if inv == nil {
			return sendOut{}, errors.New("no invocation on the context")
		}
		mb.sent = append(mb.sent, inv.IdempotencyKey)
		return sendOut{Sent: true}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := utils.InferStreamTool("stream_notes", "Read the notes on a topic.", func(_ context.Context, in notesIn) (*schema.StreamReader[string], error) {
		mb.mu.Lock()
		mb.read++
		mb.mu.Unlock()
		return schema.StreamReaderFromArray([]string{"notes on ", in.Topic}), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return send, notes
}

func toolCalls(calls ...[3]string) *schema.Message {
	var tc []schema.ToolCall
	for _, c := range calls {
		tc = append(tc, schema.ToolCall{ID: c[0], Type: "function", Function: schema.FunctionCall{Name: c[1], Arguments: c[2]}})
	}
	return schema.AssistantMessage("", tc)
}

// toolsGraph compiles a graph whose only node is a ToolsNode of cfg.
func toolsGraph(t *testing.T, cfg compose.ToolsNodeConfig, opts ...compose.GraphCompileOption) compose.Runnable[*schema.Message, []*schema.Message] {
	t.Helper()
	ctx := context.Background()
	node, err := compose.NewToolNode(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	run, err := compose.NewChain[*schema.Message, []*schema.Message]().AppendToolsNode(node).Compile(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// anyone lets every principal call an imported tool: the tests' Eino
// tools hold nobody's data.
func anyone(context.Context, string, *guard.Invocation) error { return nil }

// mustImport puts an Eino tool behind the guard.
func mustImport(t *testing.T, et tool.BaseTool, opts host.ImportOptions) *tgeino.Tool {
	t.Helper()
	w, err := tgeino.Import(context.Background(), et, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// results decodes a ToolsNode's answer by call id.
func results(t *testing.T, msgs []*schema.Message) map[string]guard.Result {
	t.Helper()
	out := map[string]guard.Result{}
	for _, m := range msgs {
		r, err := host.ModelResult(m.Content)
		if err != nil {
			t.Fatalf("tool message %q: %v", m.Content, err)
		}
		out[m.ToolCallID] = *r
	}
	return out
}

// Eino's own tools behind the guard, in a compiled graph's ToolsNode: the
// arguments are validated against the schema from their Info before they
// run, a write runs once per intent in the scope (Invoke and Stream alike)
// with the downstream key on its context, a stream-only tool runs through
// Eino's streaming endpoint, and neither an invented tool nor an Eino tool
// the guard was not given ever runs; a write that panics is an unknown
// outcome for the model, not a panic for the host.
func TestWrappedEinoTools(t *testing.T) {
	ctx := context.Background()
	mb := &mailbox{}
	send, notes := mb.einoTools(t)
	ws := mustImport(t, send, host.ImportOptions{NoApproval: true, Authorize: anyone})
	wn := mustImport(t, notes, host.ImportOptions{Read: true, Authorize: anyone})
	boom, _ := utils.InferTool("explode", "Panics.", func(context.Context, notesIn) (string, error) { panic("boom") })
	wb := mustImport(t, boom, host.ImportOptions{NoApproval: true, Authorize: anyone})
	set := toolset.MustNew(ws, wn, wb)
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	eg, err := tgeino.New(g, set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := eg.ToolsNodeConfig()
	stray := 0
	extra, _ := utils.InferTool("stray", "Not behind the guard.", func(context.Context, notesIn) (string, error) {
		stray++
		return "ran", nil
	})
	cfg.Tools = append(cfg.Tools, extra)
	run := toolsGraph(t, cfg)
	ctx = host.WithScope(host.WithPrincipal(ctx, acme), "run-wrapped")
	out, err := run.Invoke(ctx, toolCalls(
		[3]string{"c1", "send_message", `{"to":"bob","text":"hi"}`},
		[3]string{"c2", "send_message", `{"to":"bob","text":5}`},
		[3]string{"c3", "stream_notes", `{"topic":"refunds"}`},
		[3]string{"c4", "delete_everything", `{}`},
		[3]string{"c5", "stray", `{"topic":"x"}`},
		[3]string{"c7", "explode", `{"topic":"x"}`},
	))
	if err != nil {
		t.Fatal(err)
	}
	got := results(t, out)
	for id, want := range map[string]guard.Code{"c1": guard.CodeOK, "c2": guard.CodeInvalidArguments, "c3": guard.CodeOK,
		"c4": guard.CodeUnknownTool, "c5": guard.CodeUnknownTool, "c7": guard.CodeOutcomeUnknown} {
		if got[id].Code != want {
			t.Errorf("call %s: %s %s, want %s", id, got[id].Code, got[id].Message, want)
		}
	}
	if string(got["c1"].Data) != `{"sent":true}` || string(got["c3"].Data) != `"notes on refunds"` {
		t.Errorf("outputs %s and %s", got["c1"].Data, got["c3"].Data)
	}
	if stray != 0 {
		t.Errorf("the tool the guard does not know ran %d times", stray)
	}

	// The same intent again in the scope, streamed this time, with new
	// call ids and its members in another order: a replay.
	sr, err := run.Stream(ctx, toolCalls([3]string{"c6", "send_message", `{"text":"hi","to":"bob"}`}))
	if err != nil {
		t.Fatal(err)
	}
	var streamed []*schema.Message
	for {
		chunk, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range chunk {
			if m != nil {
				streamed = append(streamed, m)
			}
		}
	}
	if r := results(t, streamed)["c6"]; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("repeated send: %s/%s, want OK/local_replay", r.Code, r.Delivery)
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if len(mb.sent) != 1 || !strings.HasPrefix(mb.sent[0], "tg1_") || mb.read != 1 {
		t.Errorf("sent %v (want one, under the guard's downstream key), notes read %d times (want 1)", mb.sent, mb.read)
	}
}

// The model is given each toolset tool with the very schema its arguments
// are validated against, and the status tool.
func TestToolsCarryTheirSchemas(t *testing.T) {
	ctx := context.Background()
	set := newShop().tools(true)
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, bt := range eg.Tools() {
		info, err := bt.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, info.Name)
		d, ok := set.Lookup(info.Name).(toolset.Declared)
		if !ok {
			d = toolset.StatusTool("")
		}
		js, err := info.ParamsOneOf.ToJSONSchema()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(js)
		var got, want any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal(d.Schema().JSON(), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) || info.Desc != d.Description() {
			t.Errorf("tool %s offered with schema %s, validated against %s", info.Name, gb, wb)
		}
	}
	if strings.Join(names, ",") != "get_order,create_refund_draft,query_operation_status" {
		t.Errorf("offered %v", names)
	}
	// Run without the middleware, a toolguard tool runs nothing.
	if _, err := eg.Tools()[1].(tool.InvokableTool).InvokableRun(ctx, refundArgs); err == nil {
		t.Error("a tool ran without the middleware")
	}
}

// approvalGraph is a compiled graph, with a checkpoint store, whose
// ToolsNode runs the shop's tools (the refund needs approval) through the
// guard.
func approvalGraph(t *testing.T) (*shop, compose.Runnable[*schema.Message, []*schema.Message]) {
	t.Helper()
	shop := newShop()
	set := shop.tools(true)
	signer, _ := guard.NewSigner([]byte(strings.Repeat("k", 32)))
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer}), set, host.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	return shop, toolsGraph(t, eg.ToolsNodeConfig(), compose.WithCheckPointStore(newCheckpoints()))
}

// The approval interrupt of a compose graph with a checkpoint store:
// ApprovalsOf reads the request from Invoke's error, Resume carries the
// decision; a resume by another principal runs nothing, the right one's
// yes runs the write once.
func TestComposeApprovalInterrupt(t *testing.T) {
	ctx := context.Background()
	shop, run := approvalGraph(t)
	msg := toolCalls([3]string{"c1", "create_refund_draft", refundArgs}, [3]string{"c2", "get_order", `{"order_ref":"ORDER-7"}`})
	at := func(p guard.Principal) context.Context {
		return host.WithScope(host.WithPrincipal(ctx, p), "cp-1")
	}
	_, err := run.Invoke(at(acme), msg, compose.WithCheckPointID("cp-1"))
	pending := tgeino.ApprovalsOf(err)
	if len(pending) != 1 || pending[0].Request.CallID != "c1" {
		t.Fatalf("Invoke: %v, approvals %+v", err, pending)
	}
	yes := map[string]host.Decision{pending[0].InterruptID: {Approved: true, Approver: "manager-1"}}

	mallory := guard.Principal{TenantID: "acme", SubjectID: "user-2"}
	if _, err := run.Invoke(tgeino.Resume(at(mallory), yes), msg, compose.WithCheckPointID("cp-1")); !errors.Is(err, host.ErrOtherCall) {
		t.Fatalf("resume by another principal: %v, want ErrOtherCall", err)
	}
	if n := shop.sideEffects(); n != 0 {
		t.Fatalf("%d drafts after another principal's resume", n)
	}
	out, err := run.Invoke(tgeino.Resume(at(acme), yes), msg, compose.WithCheckPointID("cp-1"))
	if err != nil {
		t.Fatal(err)
	}
	got := results(t, out)
	if got["c1"].Code != guard.CodeOK || got["c2"].Code != guard.CodeOK || shop.sideEffects() != 1 {
		t.Fatalf("after the yes: %+v, %d drafts", got, shop.sideEffects())
	}
}

// Two writes of one reply wait for approval: resumed with a decision for
// one, that one is answered and the other interrupts again, keeping its
// place, until its own decision comes.
func TestComposeTwoApprovals(t *testing.T) {
	ctx := context.Background()
	shop, run := approvalGraph(t)
	ctx = host.WithScope(host.WithPrincipal(ctx, acme), "cp-2")
	msg := toolCalls([3]string{"c1", "create_refund_draft", refundArgs},
		[3]string{"c2", "create_refund_draft", `{ "reason": "damaged", "order_ref": "ORDER-7" }`})
	_, err := run.Invoke(ctx, msg, compose.WithCheckPointID("cp-2"))
	pending := tgeino.ApprovalsOf(err)
	if len(pending) != 2 {
		t.Fatalf("Invoke: %v, approvals %+v", err, pending)
	}
	byCall := map[string]string{}
	for _, a := range pending {
		byCall[a.Request.CallID] = a.InterruptID
	}
	_, err = run.Invoke(tgeino.Resume(ctx, map[string]host.Decision{byCall["c1"]: {Approved: true, Approver: "m"}}), msg, compose.WithCheckPointID("cp-2"))
	again := tgeino.ApprovalsOf(err)
	if len(again) != 1 || again[0].Request.CallID != "c2" || string(again[0].Request.Arguments) != `{"order_ref":"ORDER-7","reason":"damaged"}` ||
		shop.sideEffects() != 1 {
		t.Fatalf("after c1's yes: %v, approvals %+v, %d drafts", err, again, shop.sideEffects())
	}
	out, err := run.Invoke(tgeino.Resume(ctx, map[string]host.Decision{again[0].InterruptID: {Approver: "m"}}), msg, compose.WithCheckPointID("cp-2"))
	if err != nil {
		t.Fatal(err)
	}
	got := results(t, out)
	if got["c1"].Code != guard.CodeOK || got["c2"].Code != guard.CodeApprovalRequired || shop.sideEffects() != 1 {
		t.Fatalf("after c2's no: %+v, %d drafts", got, shop.sideEffects())
	}
}

// Eino's tool callbacks fire once per call: around a toolset tool's
// answer (with the model result) and around a wrapped Eino tool's run.
func TestToolCallbacks(t *testing.T) {
	ctx := context.Background()
	mb := &mailbox{}
	send, _ := mb.einoTools(t)
	ws := mustImport(t, send, host.ImportOptions{NoApproval: true, Authorize: anyone})
	set, err := newShop().tools(false).With(ws)
	if err != nil {
		t.Fatal(err)
	}
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := eg.ToolsNodeConfig()
	run := toolsGraph(t, cfg)
	var mu sync.Mutex
	starts, ends := map[string]int{}, map[string]string{}
	h := callbacks.NewHandlerBuilder().
		OnStartFn(func(ctx context.Context, info *callbacks.RunInfo, in callbacks.CallbackInput) context.Context {
			if info.Component == components.ComponentOfTool {
				mu.Lock()
				starts[info.Name]++
				mu.Unlock()
			}
			return ctx
		}).
		OnEndFn(func(ctx context.Context, info *callbacks.RunInfo, out callbacks.CallbackOutput) context.Context {
			if info.Component == components.ComponentOfTool {
				mu.Lock()
				ends[info.Name] = tool.ConvCallbackOutput(out).Response
				mu.Unlock()
			}
			return ctx
		}).Build()
	ctx = host.WithScope(host.WithPrincipal(ctx, acme), "run-callbacks")
	if _, err := run.Invoke(ctx, toolCalls([3]string{"c1", "get_order", `{"order_ref":"ORDER-7"}`},
		[3]string{"c2", "send_message", `{"to":"bob","text":"hi"}`}), compose.WithCallbacks(h)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if starts["get_order"] != 1 || starts["send_message"] != 1 {
		t.Errorf("callbacks started %v, want once per tool", starts)
	}
	if !strings.Contains(ends["get_order"], `"contract":"tool-model-result-v2"`) || ends["send_message"] != `{"sent":true}` {
		t.Errorf("callbacks ended with %v", ends)
	}
}

// Two identical writes in one reply, run in parallel by the ToolsNode, are
// one operation in the scope: one draft; the second call either waits on
// the first (IN_PROGRESS) or replays it.
func TestParallelRepeatRunsOnce(t *testing.T) {
	shop := newShop()
	set := shop.tools(false)
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := toolsGraph(t, eg.ToolsNodeConfig())
	ctx := host.WithScope(host.WithPrincipal(context.Background(), acme), "run-parallel")
	for i := 0; i < 20; i++ {
		out, err := run.Invoke(ctx, toolCalls([3]string{fmt.Sprintf("a%d", i), "create_refund_draft", refundArgs},
			[3]string{fmt.Sprintf("b%d", i), "create_refund_draft", refundArgs}))
		if err != nil {
			t.Fatal(err)
		}
		for id, r := range results(t, out) {
			if r.Code != guard.CodeOK && r.Code != guard.CodeInProgress {
				t.Fatalf("call %s: %s", id, r.Code)
			}
		}
	}
	if n := shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}

// A host that configures the middleware twice (say, in ToolsNodeConfig and
// again as an agent's handler) still gets one dispatch per call: the inner
// one lets the guarded call through.
func TestMiddlewareTwice(t *testing.T) {
	mb := &mailbox{}
	send, _ := mb.einoTools(t)
	set := toolset.MustNew(mustImport(t, send, host.ImportOptions{NoApproval: true, Authorize: anyone}))
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := eg.ToolsNodeConfig()
	cfg.ToolCallMiddlewares = append(cfg.ToolCallMiddlewares, eg.ToolMiddleware())
	run := toolsGraph(t, cfg)
	ctx := host.WithScope(host.WithPrincipal(context.Background(), acme), "run-twice")
	out, err := run.Invoke(ctx, toolCalls([3]string{"c1", "send_message", `{"to":"bob","text":"hi"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if r := results(t, out)["c1"]; r.Code != guard.CodeOK || string(r.Data) != `{"sent":true}` || len(mb.sent) != 1 {
		t.Fatalf("result %s %s, %d sent", r.Code, r.Data, len(mb.sent))
	}
}

// Import fails closed: it needs the host's Authorize, an imported tool is a
// write that needs approval unless the host says otherwise, and a call
// Authorize refuses is NOT_FOUND and never runs.
func TestImportDefaults(t *testing.T) {
	ctx := context.Background()
	mb := &mailbox{}
	send, _ := mb.einoTools(t)
	if _, err := tgeino.Import(ctx, send, host.ImportOptions{}); err == nil {
		t.Fatal("Import without Authorize succeeded")
	}
	onlyAcme := func(_ context.Context, tool string, inv *guard.Invocation) error {
		if tool != "send_message" || inv.Principal.TenantID != "acme" {
			return guard.ErrNotFound
		}
		return nil
	}
	it := mustImport(t, send, host.ImportOptions{Authorize: onlyAcme})
	if s := it.Spec(); s.Effect != guard.Write || !s.NeedsApproval {
		t.Fatalf("imported tool's spec %+v, want a write that needs approval", s)
	}
	set := toolset.MustNew(mustImport(t, send, host.ImportOptions{Authorize: onlyAcme, NoApproval: true}))
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := toolsGraph(t, eg.ToolsNodeConfig())
	globex := guard.Principal{TenantID: "globex", SubjectID: "user-9"}
	out, err := run.Invoke(host.WithScope(host.WithPrincipal(ctx, globex), "run-import"),
		toolCalls([3]string{"c1", "send_message", `{"to":"bob","text":"hi"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if r := results(t, out)["c1"]; r.Code != guard.CodeNotFound || len(mb.sent) != 0 {
		t.Fatalf("another tenant's call: %s, %d sent", r.Code, len(mb.sent))
	}
}
