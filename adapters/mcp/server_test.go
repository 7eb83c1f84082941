package tgmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

var (
	user1 = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	key   = bytes.Repeat([]byte("mcp-test-approval-key/"), 2)
)

// world is the orders world served over MCP.
type world struct {
	svc    *orders.Service
	g      *guard.Guard
	store  guard.Store
	signer *guard.Signer
	server *tgmcp.Server
}

func newWorld(t *testing.T, opts tgmcp.Options) *world {
	t.Helper()
	_, rdb := redistest.Mini(t)
	store, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := guard.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	svc := orders.NewService()
	tools := orders.Tools(svc)
	g := guard.New(tools, store, guard.Options{Signer: signer})
	if opts.Principal == nil {
		opts.Principal = &user1
	}
	srv, err := tgmcp.NewServer(g, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &world{svc: svc, g: g, store: store, signer: signer, server: srv}
}

// connect connects a client in memory, with the client options given.
func (w *world) connect(t *testing.T, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := w.server.Connect(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args any, meta sdk.Meta) (*guard.Result, *sdk.CallToolResult) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	res, err := tgmcp.ModelResult(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := r.Content[0].(*sdk.TextContent).Text
	if text != res.String() {
		t.Fatalf("content %s, structured %s", text, res.String())
	}
	if r.IsError != (res.Code != guard.CodeOK) {
		t.Fatalf("isError %t for %s", r.IsError, res.Code)
	}
	return res, r
}

func TestListTools(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tl := range lt.Tools {
		got[tl.Name] = tl
	}
	for _, d := range orders.Tools(w.svc).Tools() {
		tl := got[d.Name()]
		if tl == nil {
			t.Fatalf("tool %s not listed", d.Name())
		}
		in, _ := json.Marshal(tl.InputSchema)
		var a, b any
		_ = json.Unmarshal(in, &a)
		_ = json.Unmarshal(tgmcp.InputSchema(d), &b)
		if !jsonEqual(a, b) {
			t.Errorf("%s inputSchema %s, want %s", d.Name(), in, tgmcp.InputSchema(d))
		}
		out, _ := json.Marshal(tl.OutputSchema)
		if !strings.Contains(string(out), `"const":"tool-model-result-v2"`) {
			t.Errorf("%s outputSchema %s", d.Name(), out)
		}
		if tl.Annotations.ReadOnlyHint != (d.Spec().Effect == guard.Read) {
			t.Errorf("%s readOnlyHint %t", d.Name(), tl.Annotations.ReadOnlyHint)
		}
	}
	if got[toolset.StatusToolName] == nil {
		t.Fatal("no status tool")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestGetOrder(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	res, r := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-7"}, nil)
	if res.Code != guard.CodeOK || string(res.Data) != `{"order_ref":"ORDER-7","status":"paid"}` || r.IsError {
		t.Fatalf("got %s", res)
	}
	// Another tenant's order, named in the arguments: not found, exactly as
	// if it did not exist.
	res, _ = call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-9"}, nil)
	if res.Code != guard.CodeNotFound {
		t.Fatalf("ORDER-9 of tenant-b: %s", res)
	}
}

// A write without a grant, on a server that cannot elicit, is
// APPROVAL_REQUIRED; with a grant in _meta it runs once, and the client's
// idempotency key replays it (each CallTool is a new JSON-RPC request).
func TestRefundWithGrantInMeta(t *testing.T) {
	w := newWorld(t, tgmcp.Options{Signer: nil})
	cs := w.connect(t, nil)
	args := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
	res, _ := call(t, cs, "create_refund_draft", args, nil)
	if res.Code != guard.CodeApprovalRequired || w.svc.SideEffects() != 0 {
		t.Fatalf("no grant: %s, %d drafts", res, w.svc.SideEffects())
	}
	argsJSON, _ := json.Marshal(args)
	grant := guard.NewGrant(user1, guard.Proposal{Name: "create_refund_draft", Arguments: argsJSON}, "approver", guard.SystemClock.Now(), 60e9)
	tok, _ := w.signer.Sign(grant)
	meta := sdk.Meta{tgmcp.MetaApproval: tok, tgmcp.MetaIdempotencyKey: "refund-1"}
	for i, want := range []guard.Delivery{guard.DeliveryFresh, guard.DeliveryLocalReplay} {
		res, _ = call(t, cs, "create_refund_draft", args, meta)
		if res.Code != guard.CodeOK || res.Delivery != want || w.svc.SideEffects() != 1 {
			t.Fatalf("call %d: %s, %d drafts", i, res, w.svc.SideEffects())
		}
	}
}

// The elicitation: the human says yes once (the refund runs once, a repeat
// with the same key replays without asking), then no for another order.
func TestRefundElicitation(t *testing.T) {
	w := newWorld(t, tgmcp.Options{Signer: mustSigner(t)})
	var asked atomic.Int32
	answer := "accept"
	cs := w.connect(t, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(req.Params.Message, "create_refund_draft") || !strings.Contains(req.Params.Message, `"order_ref":"ORDER-7"`) {
				t.Errorf("elicitation message %q does not name the tool and arguments", req.Params.Message)
			}
			if answer == "accept" {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &sdk.ElicitResult{Action: answer}, nil
		},
	})
	args := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
	meta := sdk.Meta{tgmcp.MetaIdempotencyKey: "refund-7"}
	res, _ := call(t, cs, "create_refund_draft", args, meta)
	if res.Code != guard.CodeOK || w.svc.SideEffects() != 1 || asked.Load() != 1 {
		t.Fatalf("approved: %s, %d drafts, asked %d", res, w.svc.SideEffects(), asked.Load())
	}
	res, _ = call(t, cs, "create_refund_draft", args, meta)
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay || w.svc.SideEffects() != 1 || asked.Load() != 1 {
		t.Fatalf("repeat: %s, %d drafts, asked %d", res, w.svc.SideEffects(), asked.Load())
	}
	for _, a := range []string{"decline", "cancel"} {
		answer = a
		res, _ = call(t, cs, "create_refund_draft", map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}, nil)
		if res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage || w.svc.SideEffects() != 1 {
			t.Fatalf("%s: %s, %d drafts", a, res, w.svc.SideEffects())
		}
	}
}

func mustSigner(t testing.TB) *guard.Signer {
	s, err := guard.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A client that sends no ids (as the official SDKs do) and whose human
// approves every elicitation repeats an approved refund in one session: it
// runs once, and the human is asked once. The session is the scope: a new
// session is a new operation, unless the clients name one scope in _meta.
func TestRepeatedWriteInOneSession(t *testing.T) {
	w := newWorld(t, tgmcp.Options{Signer: mustSigner(t)})
	var asked atomic.Int32
	opts := &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked.Add(1)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	}
	args := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
	repeat := func(cs *sdk.ClientSession, meta sdk.Meta, want ...guard.Delivery) *guard.Result {
		t.Helper()
		var first *guard.Result
		for i, d := range want {
			res, _ := call(t, cs, "create_refund_draft", args, meta)
			if res.Code != guard.CodeOK || res.Delivery != d {
				t.Fatalf("call %d: %s, want OK/%s", i, res, d)
			}
			if first == nil {
				first = res
			} else if string(res.Data) != string(first.Data) {
				t.Fatalf("call %d: %s, want the first call's %s", i, res.Data, first.Data)
			}
		}
		return first
	}
	fresh, replay := guard.DeliveryFresh, guard.DeliveryLocalReplay
	repeat(w.connect(t, opts), nil, fresh, replay, replay)
	if n, a := w.svc.SideEffects(), asked.Load(); n != 1 || a != 1 {
		t.Fatalf("one session: %d drafts, asked %d; want 1 and 1", n, a)
	}
	repeat(w.connect(t, opts), nil, fresh, replay)
	if n, a := w.svc.SideEffects(), asked.Load(); n != 2 || a != 2 {
		t.Fatalf("a reconnect: %d drafts, asked %d; want 2 and 2", n, a)
	}
	// Two sessions of one conversation, named in _meta: one operation.
	meta := sdk.Meta{tgmcp.MetaScope: "conversation-9"}
	repeat(w.connect(t, opts), meta, fresh, replay)
	repeat(w.connect(t, opts), meta, replay)
	if n, a := w.svc.SideEffects(), asked.Load(); n != 3 || a != 3 {
		t.Fatalf("a scope across sessions: %d drafts, asked %d; want 3 and 3", n, a)
	}
}

// The status tool's inputSchema is what its arguments are validated
// against, through a real client: the listed schema, compiled, accepts a
// call exactly when the server does not answer INVALID_ARGUMENTS. tool may
// be absent (MCP has no strict mode: absent reads as null, section 3),
// null or a string; operation_id is required.
func TestStatusToolSchemaIsWhatItValidates(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed any
	for _, tool := range lt.Tools {
		if tool.Name == toolset.StatusToolName {
			listed = tool.InputSchema
		}
	}
	raw, _ := json.Marshal(listed)
	var want any
	_ = json.Unmarshal(tgmcp.InputSchema(toolset.StatusTool("")), &want)
	if !jsonEqual(listed, want) || !strings.Contains(string(raw), `"required":["operation_id"]`) {
		t.Fatalf("status inputSchema %s: want toolset.StatusTool's, operation_id alone required", raw)
	}
	schema, err := toolset.CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args any
		want guard.Code
	}{
		{map[string]any{"operation_id": "op-1"}, guard.CodeNotFound}, // tool absent: null
		{map[string]any{"operation_id": "op-1", "tool": nil}, guard.CodeNotFound},
		// Nothing stored, a write's tool named, no key: the receipt is
		// asked under a guessed key, which proves nothing.
		{map[string]any{"operation_id": "op-1", "tool": "create_refund_draft"}, guard.CodeOutcomeUnknown},
		{map[string]any{"operation_id": "op-1", "tool": "get_order"}, guard.CodeNotFound},
		{map[string]any{}, guard.CodeInvalidArguments},
		{map[string]any{"tool": "get_order"}, guard.CodeInvalidArguments},
		{nil, guard.CodeInvalidArguments}, // no arguments: {}
		{map[string]any{"operation_id": 7, "tool": nil}, guard.CodeInvalidArguments},
		{map[string]any{"operation_id": "op-1", "tool": 7}, guard.CodeInvalidArguments},
		{map[string]any{"operation_id": "op-1", "tool": nil, "extra": true}, guard.CodeInvalidArguments},
	} {
		res, _ := call(t, cs, toolset.StatusToolName, tc.args, nil)
		if res.Code != tc.want {
			t.Errorf("%v: %s, want %s", tc.args, res, tc.want)
		}
		args := tc.args
		if args == nil {
			args = map[string]any{}
		}
		b, _ := json.Marshal(args)
		if valid := schema.Validate(parse(t, string(b))) == nil; valid != (res.Code != guard.CodeInvalidArguments) {
			t.Errorf("%s: the listed schema accepts %t, the server answered %s", b, valid, res.Code)
		}
	}
}
