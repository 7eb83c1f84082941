package tgadk_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

type voucherIn struct {
	OrderRef string `json:"order_ref"`
	Cents    int    `json:"cents"`
}

type voucherOut struct {
	VoucherID string `json:"voucher_id"`
}

// vouchers is an ADK functiontool with a side effect, and what it did.
type vouchers struct {
	mu   sync.Mutex
	keys []string // the downstream idempotency key of each voucher issued
}

func (v *vouchers) tool(t *testing.T) *tgadk.Tool {
	ft, err := functiontool.New(functiontool.Config{Name: "issue_voucher", Description: "Issue a voucher for an order."},
		func(ctx agent.Context, in voucherIn) (voucherOut, error) {
			inv := host.InvocationFrom(ctx)
			v.mu.Lock()
			defer v.mu.Unlock()
			v.keys = append(v.keys, inv.IdempotencyKey)
			return voucherOut{VoucherID: "V-" + in.OrderRef}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	it, err := tgadk.Import(ft, host.ImportOptions{NoApproval: true,
		Authorize: func(_ context.Context, _ string, inv *guard.Invocation) error {
			var in voucherIn
			if json.Unmarshal(inv.Arguments, &in) != nil || inv.Principal.TenantID != "tenant-a" {
				return guard.ErrNotFound
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func (v *vouchers) issued() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.keys...)
}

// TestImportedFunctionTool: an ADK functiontool behind the guard. The
// model is offered its own declaration; its arguments are validated
// against its schema before it runs; it runs once per intent in the
// session with the downstream key in its context; another tenant gets
// NOT_FOUND without it running.
func TestImportedFunctionTool(t *testing.T) {
	v := &vouchers{}
	it := v.tool(t)
	set := toolset.MustNew(it)
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	a, err := tgadk.New(g, set, tgadk.Options{Options: host.Options{Principal: byUser}})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeModel{}
	r := newRunner(t, a, m)
	voucher := func(id string, args map[string]any) *genai.FunctionCall {
		return &genai.FunctionCall{ID: id, Name: "issue_voucher", Args: args}
	}
	m.push(calls(voucher("bad", map[string]any{"order_ref": "ORDER-7", "cents": "ten"}),
		voucher("extra", map[string]any{"order_ref": "ORDER-7", "cents": 500, "admin": true})))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("a voucher please", genai.RoleUser))
	for _, id := range []string{"bad", "extra"} {
		if res := result(t, evs, id); res.Code != guard.CodeInvalidArguments {
			t.Errorf("%s = %s, want INVALID_ARGUMENTS", id, res)
		}
	}
	if n := len(v.issued()); n != 0 {
		t.Fatalf("the tool ran %d times on arguments its schema refuses", n)
	}

	m.push(calls(voucher("v1", map[string]any{"order_ref": "ORDER-7", "cents": 500})))
	evs = run(t, r, "user-1", "s1", genai.NewContentFromText("a voucher please", genai.RoleUser))
	first := result(t, evs, "v1")
	if first.Code != guard.CodeOK || string(first.Data) != `{"voucher_id":"V-ORDER-7"}` {
		t.Fatalf("v1 = %s, want OK with the voucher", first)
	}
	m.push(calls(voucher("v2", map[string]any{"cents": 500, "order_ref": "ORDER-7"})))
	evs = run(t, r, "user-1", "s1", genai.NewContentFromText("again", genai.RoleUser))
	if res := result(t, evs, "v2"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("v2 = %s, want the voucher replayed", res)
	}
	m.push(calls(voucher("v9", map[string]any{"order_ref": "ORDER-9", "cents": 500})))
	evs = run(t, r, "user-9", "s9", genai.NewContentFromText("a voucher please", genai.RoleUser))
	if res := result(t, evs, "v9"); res.Code != guard.CodeNotFound {
		t.Errorf("v9 = %s, want NOT_FOUND", res)
	}
	keys := v.issued()
	if len(keys) != 1 || keys[0] == "" {
		t.Errorf("vouchers issued under keys %q, want one under the guard's downstream key", keys)
	}

	var decl *genai.FunctionDeclaration
	for _, tl := range m.lastRequest().Config.Tools {
		for _, d := range tl.FunctionDeclarations {
			if d.Name == "issue_voucher" {
				decl = d
			}
		}
	}
	want, _ := json.Marshal(it.Schema().Map())
	got, _ := json.Marshal(decl.ParametersJsonSchema)
	if decl == nil || frameworktest.CanonicalJSON(t, got) != frameworktest.CanonicalJSON(t, want) {
		t.Errorf("offered declaration schema %s, want the tool's own %s", got, want)
	}
}

// TestImportRefuses: Import refuses what it cannot guard.
func TestImportRefuses(t *testing.T) {
	ft, err := functiontool.New(functiontool.Config{Name: "later", IsLongRunning: true},
		func(agent.Context, voucherIn) (voucherOut, error) { return voucherOut{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	allow := func(context.Context, string, *guard.Invocation) error { return nil }
	if _, err := tgadk.Import(ft, host.ImportOptions{Authorize: allow}); err == nil {
		t.Error("a long-running tool was imported")
	}
	if _, err := tgadk.Import(ft, host.ImportOptions{}); err == nil {
		t.Error("a tool was imported without Authorize")
	}
	if _, err := tgadk.Import(nil, host.ImportOptions{Authorize: allow}); err == nil {
		t.Error("a nil tool was imported")
	}
}

// TestUnguardedRefused: with AllowUnguarded, an ADK tool the host gave the
// agent without importing it is UNKNOWN_TOOL and never runs, unless
// allowed; guarded tools run as ever.
func TestUnguardedRefused(t *testing.T) {
	var ran atomic.Int32
	raw, err := functiontool.New(functiontool.Config{Name: "wipe_orders", Description: "Wipe the orders."},
		func(agent.Context, voucherIn) (voucherOut, error) { ran.Add(1); return voucherOut{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := functiontool.New(functiontool.Config{Name: "say_hello", Description: "Say hello."},
		func(agent.Context, struct{}) (voucherOut, error) {
			ran.Add(1)
			return voucherOut{VoucherID: "hello"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	v := &vouchers{}
	set := toolset.MustNew(v.tool(t))
	a, err := tgadk.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, tgadk.Options{
		Options:        host.Options{Principal: byUser},
		AllowUnguarded: func(t tool.Tool) bool { return t.Name() == "say_hello" }})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeModel{}
	r := newRunnerFor(t, a, llmagent.Config{Model: m, Tools: append(a.Tools(), raw, allowed)})
	m.push(calls(&genai.FunctionCall{ID: "w", Name: "wipe_orders", Args: map[string]any{"order_ref": "ORDER-7", "cents": 1}},
		&genai.FunctionCall{ID: "h", Name: "say_hello", Args: map[string]any{}},
		&genai.FunctionCall{ID: "v", Name: "issue_voucher", Args: map[string]any{"order_ref": "ORDER-7", "cents": 1}}))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("go", genai.RoleUser))
	if res := result(t, evs, "w"); res.Code != guard.CodeUnknownTool {
		t.Errorf("unguarded tool = %s, want UNKNOWN_TOOL", res)
	}
	if res := result(t, evs, "v"); res.Code != guard.CodeOK {
		t.Errorf("guarded tool = %s, want OK", res)
	}
	if ran.Load() != 1 || len(v.issued()) != 1 {
		t.Errorf("raw tools ran %d times (want 1: say_hello), vouchers %d (want 1)", ran.Load(), len(v.issued()))
	}
}
