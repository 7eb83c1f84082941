package tgmcp_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// thirdParty is an MCP server no guard knows of: a read (lookup) that
// counts its calls, a write (add_note) that records what it was sent, and a
// write that never answers (slow_write).
type thirdParty struct {
	mu      sync.Mutex
	lookups int
	notes   []string
	keys    []any // the _meta idempotency key of each add_note call
}

func (tp *thirdParty) server() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "third-party", Version: "v1"}, nil)
	type noteIn struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "lookup", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in noteIn) (*sdk.CallToolResult, map[string]any, error) {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			tp.lookups++
			return nil, map[string]any{"found": in.Text}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add_note", Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest, in noteIn) (*sdk.CallToolResult, map[string]any, error) {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			tp.notes = append(tp.notes, in.Text)
			tp.keys = append(tp.keys, req.Params.Meta[tgmcp.MetaIdempotencyKey])
			return nil, map[string]any{"notes": len(tp.notes)}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow_write"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return s
}

func (tp *thirdParty) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.notes)
}

func (tp *thirdParty) lookupCount() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.lookups
}

// guarded connects to the third party in memory, imports its tools and
// puts a guard in front of them. Principals of tenant-a may call them.
func guarded(t *testing.T, tp *thirdParty, opts tgmcp.ImportOptions) (*guard.Guard, *tgmcp.RemoteTools) {
	t.Helper()
	return importInto(t, connectTo(t, tp.server()), opts)
}

// connectTo connects a client session to srv in memory, both closed when
// the test ends.
func connectTo(t *testing.T, srv *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "guard", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// importInto imports the session's tools, which principals of tenant-a
// may call unless opts.Authorize says otherwise, and puts a guard in front
// of them.
func importInto(t *testing.T, cs *sdk.ClientSession, opts tgmcp.ImportOptions) (*guard.Guard, *tgmcp.RemoteTools) {
	t.Helper()
	rt := importTools(t, cs, opts)
	_, rdb := redistest.Mini(t)
	store, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return guard.New(rt, store, guard.Options{Signer: mustSigner(t)}), rt
}

// importTools imports the session's tools; without opts.Authorize,
// principals of tenant-a may call them.
func importTools(t *testing.T, cs *sdk.ClientSession, opts tgmcp.ImportOptions) *tgmcp.RemoteTools {
	t.Helper()
	if opts.Authorize == nil {
		opts.Authorize = func(_ context.Context, _ string, inv *guard.Invocation) error {
			if inv.Principal.TenantID != "tenant-a" {
				return guard.ErrNotFound
			}
			return nil
		}
	}
	rt, err := tgmcp.Import(context.Background(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func dispatch(t *testing.T, g *guard.Guard, call guard.Call) *guard.Result {
	t.Helper()
	res, err := g.Dispatch(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func remoteCall(p guard.Principal, name, args, key string) guard.Call {
	return guard.Call{Principal: p, Proposal: guard.Proposal{Name: name, Arguments: []byte(args)},
		Context: guard.ExecutionContext{Provider: "test", IdempotencyKey: key}}
}

func grantFor(t *testing.T, call guard.Call) string {
	tok, err := mustSigner(t).Sign(guard.NewGrant(call.Principal, call.Proposal, "approver", time.Now(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestImportEffects(t *testing.T) {
	tp := &thirdParty{}
	_, rt := guarded(t, tp, tgmcp.ImportOptions{NoApproval: func(d *sdk.Tool) bool { return d.Name == "slow_write" }})
	for name, want := range map[string][3]bool{ // read, needs approval, idempotent
		"lookup": {true, false, false}, "add_note": {false, true, true}, "slow_write": {false, false, false},
	} {
		tl := rt.Lookup(name).(*tgmcp.RemoteTool)
		got := [3]bool{tl.Spec().Effect == guard.Read, tl.Spec().NeedsApproval, tl.Idempotent()}
		if got != want {
			t.Errorf("%s: read, approval, idempotent = %v, want %v", name, got, want)
		}
	}
	if rt.Lookup("Lookup") != nil {
		t.Error("lookup is exact")
	}
}

func TestRemoteCallsPassTheGuard(t *testing.T) {
	tp := &thirdParty{}
	g, _ := guarded(t, tp, tgmcp.ImportOptions{})

	res := dispatch(t, g, remoteCall(user1, "lookup", `{"text":"x"}`, ""))
	if res.Code != guard.CodeOK || string(res.Data) != `{"found":"x"}` {
		t.Fatalf("lookup: %s", res)
	}
	// The server's schema is checked here: a wrong type never leaves.
	res = dispatch(t, g, remoteCall(user1, "add_note", `{"text":7}`, "k1"))
	if res.Code != guard.CodeInvalidArguments || tp.count() != 0 {
		t.Fatalf("bad arguments: %s, %d remote calls", res, tp.count())
	}
	// Another tenant: not found, never sent.
	other := guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}
	c := remoteCall(other, "add_note", `{"text":"hi"}`, "k1")
	c.Approval = grantFor(t, c)
	if res = dispatch(t, g, c); res.Code != guard.CodeNotFound || tp.count() != 0 {
		t.Fatalf("tenant-b: %s, %d remote calls", res, tp.count())
	}
	// A write needs approval; with it, it runs once, and the downstream
	// key travels in _meta.
	c = remoteCall(user1, "add_note", `{"text":"hi"}`, "k1")
	if res = dispatch(t, g, c); res.Code != guard.CodeApprovalRequired || tp.count() != 0 {
		t.Fatalf("no approval: %s, %d remote calls", res, tp.count())
	}
	c.Approval = grantFor(t, c)
	for i := 0; i < 2; i++ {
		if res = dispatch(t, g, c); res.Code != guard.CodeOK || tp.count() != 1 {
			t.Fatalf("call %d: %s, %d remote calls", i, res, tp.count())
		}
	}
	if k, _ := tp.keys[0].(string); len(k) < 10 || k[:4] != "tg1_" {
		t.Fatalf("remote _meta idempotency key %v, want the guard's downstream key", tp.keys[0])
	}
}

// A remote write whose reply never comes is OUTCOME_UNKNOWN.
func TestRemoteLostReply(t *testing.T) {
	g, _ := guarded(t, &thirdParty{}, tgmcp.ImportOptions{NoApproval: func(*sdk.Tool) bool { return true }})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := g.Dispatch(ctx, remoteCall(user1, "slow_write", `{}`, "slow-1"))
	if err != nil || res.Code != guard.CodeOutcomeUnknown {
		t.Fatalf("got %v, %v", res, err)
	}
}

// A remote server that is gone before the call: the connection is refused
// before anything is sent, TIMEOUT_BEFORE_EXECUTE, and a retry may run.
func TestRemoteConnectionRefused(t *testing.T) {
	tp := &thirdParty{}
	srv := tp.server()
	ln, err := net.Listen("tcp", "127.0.0.1:19171")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true})}
	go func() { _ = hs.Serve(ln) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "guard", Version: "v1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: "http://127.0.0.1:19171/", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	g, _ := importInto(t, cs, tgmcp.ImportOptions{NoApproval: func(*sdk.Tool) bool { return true }})
	_ = hs.Close()
	res := dispatch(t, g, remoteCall(user1, "add_note", `{"text":"hi"}`, "refused-1"))
	if res.Code != guard.CodeTimeoutBeforeExecute || tp.count() != 0 {
		t.Fatalf("got %s, %d remote calls", res, tp.count())
	}
}

// A toolguard server imported into another guard: its model results are
// read by code.
func TestImportToolguardServer(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	g, _ := importInto(t, cs, tgmcp.ImportOptions{})
	res := dispatch(t, g, remoteCall(user1, "get_order", `{"order_ref":"ORDER-7"}`, ""))
	var data map[string]string
	if res.Code != guard.CodeOK || json.Unmarshal(res.Data, &data) != nil || data["status"] != "paid" {
		t.Fatalf("get_order: %s", res)
	}
	if res = dispatch(t, g, remoteCall(user1, "get_order", `{"order_ref":"ORDER-9"}`, "")); res.Code != guard.CodeNotFound {
		t.Fatalf("ORDER-9: %s", res)
	}
}
