package tgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/mcptest"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// fleet is two replicas of one MCP server, as two processes would run it:
// each its own guard, store client, server and HTTP handler, over one
// Redis (the guard's records and the StateStore under one prefix) and one
// Signer key, behind a round-robin proxy. The downstream system (the order
// service) is one, as a real one is; every execution of a write tool is
// counted, on either replica.
type fleet struct {
	t        testing.TB
	rdb      redis.UniversalClient
	prefix   string
	svc      *orders.Service
	runs     atomic.Int64                  // executions of write tools, both replicas
	gate     atomic.Pointer[chan struct{}] // when set, writes wait for it to close
	started  chan struct{}                 // a write signals here when it waits at the gate
	opts     tgmcp.Options
	replicas [2]*replica
	proxy    *mcptest.Balancer
	url      string // the proxy's endpoint
}

// replica is one server of the fleet behind its own listener; restart
// replaces it with a new one, as a process started again is, on the same
// address.
type replica struct {
	handler atomic.Pointer[http.Handler]
	url     string
	starts  int
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	(*r.handler.Load()).ServeHTTP(w, req)
}

// noteIn and noteOut are the input and output of send_note, a write that
// needs no approval.
type noteIn struct {
	To   string `json:"to"`
	Text string `json:"text"`
}
type noteOut struct {
	Sent string `json:"sent"`
}

// countedTool counts the executions of a write tool and, while the fleet
// has a gate, waits for it to open.
type countedTool struct {
	toolset.Declared
	f *fleet
}

func (c countedTool) Execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	c.f.runs.Add(1)
	if g := c.f.gate.Load(); g != nil {
		c.f.started <- struct{}{}
		<-*g
	}
	return c.Declared.Execute(ctx, inv)
}

// tools are the order tools and send_note, their writes counted.
func (f *fleet) tools() *toolset.Set {
	note := toolset.Write("send_note", "Send a note to someone.", func(_ context.Context, _ *guard.Invocation, in noteIn) (noteOut, error) {
		return noteOut{Sent: in.To + ": " + in.Text}, nil
	}, nil)
	var all []toolset.Declared
	for _, d := range append(orders.Tools(f.svc).Tools(), note) {
		if d.Spec().Effect == guard.Write {
			d = countedTool{Declared: d, f: f}
		}
		all = append(all, d)
	}
	return toolset.MustNew(all...)
}

// newFleet starts two replicas over rdb behind a round-robin proxy.
func newFleet(t testing.TB, rdb redis.UniversalClient, opts tgmcp.Options) *fleet {
	t.Helper()
	f := &fleet{t: t, rdb: rdb, prefix: redistest.Prefix(t), svc: orders.NewService(), opts: opts, started: make(chan struct{}, 16)}
	var urls [2]string
	for i := range f.replicas {
		r := &replica{}
		f.replicas[i] = r
		f.restart(i)
		hs := httptest.NewServer(r)
		t.Cleanup(hs.Close)
		r.url = hs.URL
		urls[i] = hs.URL
	}
	f.proxy = mcptest.NewBalancer(urls[:]...)
	ps := httptest.NewServer(f.proxy)
	t.Cleanup(ps.Close)
	f.url = ps.URL
	return f
}

// restart replaces replica i by a new one: a new guard, store client
// objects and server, as a process started again has, nothing kept in
// memory.
func (f *fleet) restart(i int) { f.restartWith(i, f.rdb) }

// restartWith restarts replica i with its guard's store on rdb (e.g.
// through a TCP proxy the test cuts); the StateStore stays on the fleet's.
func (f *fleet) restartWith(i int, rdb redis.UniversalClient) {
	f.t.Helper()
	store, err := idem.New(rdb, idem.Options{Prefix: f.prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	signer := mustSigner(f.t)
	tools := f.tools()
	g := guard.New(tools, store, guard.Options{Signer: signer})
	opts := f.opts
	opts.Signer = signer
	if opts.State == nil {
		opts.State = tgmcp.NewRedisStateStore(f.rdb, f.prefix+"mcp:")
	}
	srv, err := tgmcp.NewServer(g, tools, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	var h http.Handler = srv.Handler(testTokens, nil)
	f.replicas[i].handler.Store(&h)
	f.replicas[i].starts++
}

// testTokens accepts "token-a" (tenant-a/user-1) and "token-b"
// (tenant-b/user-1), without scopes, and "token-a-read" and
// "token-a-refund", tenant-a/user-1 with orders:read, and with
// orders:read and orders:refund.
func testTokens(_ context.Context, tok string, _ *http.Request) (tgmcp.Token, error) {
	switch tok {
	case "token-a":
		return tgmcp.Token{Principal: user1, Expiry: time.Now().Add(time.Hour)}, nil
	case "token-b":
		return tgmcp.Token{Principal: user2b, Expiry: time.Now().Add(time.Hour)}, nil
	case "token-a-read":
		return tgmcp.Token{Principal: user1, Scopes: []string{"orders:read"}, Expiry: time.Now().Add(time.Hour)}, nil
	case "token-a-refund":
		return tgmcp.Token{Principal: user1, Scopes: []string{"orders:read", "orders:refund"}, Expiry: time.Now().Add(time.Hour)}, nil
	}
	return tgmcp.Token{}, errors.New("unknown token")
}

// human is the client's human: it answers every question as answer says,
// and counts them.
type human struct {
	asked  atomic.Int64
	answer func(n int64) bool // the n-th question (1-based): approve?
	before func(n int64)      // runs before the answer, e.g. to restart the replica that asked
}

func (h *human) elicit(_ context.Context, _ *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	n := h.asked.Add(1)
	if h.before != nil {
		h.before(n)
	}
	if h.answer != nil && !h.answer(n) {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
}

// connect connects go-sdk's client to the fleet through the proxy, on the
// protocol version given ("" for the latest, 2026-07-28), with its own
// multi round-trip loop unless manual.
func (f *fleet) connect(t *testing.T, token string, h *human, version string, manual bool) *sdk.ClientSession {
	t.Helper()
	copts := &sdk.ClientOptions{}
	if h != nil {
		copts.ElicitationHandler = h.elicit
	}
	if manual {
		copts.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "fleet-test", Version: "v0"}, copts)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: f.url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// lastCall returns the replica that got the last tools/call of tool.
func (f *fleet) lastCall(tool string) int {
	c := f.proxy.Calls(tool)
	if len(c) == 0 {
		f.t.Fatalf("no tools/call of %s went through the proxy", tool)
	}
	return c[len(c)-1].Replica
}

var refund7 = map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}

// mustCall calls a tool and returns the model result; any error fails.
func mustCall(t *testing.T, cs *sdk.ClientSession, params *sdk.CallToolParams) *guard.Result {
	t.Helper()
	r, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	res, err := tgmcp.ModelResult(r)
	if err != nil {
		t.Fatalf("%s: %v (%+v)", params.Name, err, r)
	}
	return res
}

// The first case: two replicas, round robin, protocol 2026-07-28,
// go-sdk's own client loop. The question is asked by one replica and the
// answer reaches the other: one question, one execution, no error.
func TestFleetAnswerReachesTheOtherReplica(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		f := newFleet(t, rdb, tgmcp.Options{})
		h := &human{}
		cs := f.connect(t, "token-a", h, "", false)
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("protocol %s, want 2026-07-28", v)
		}
		res := mustCall(t, cs, &sdk.CallToolParams{Name: "create_refund_draft", Arguments: refund7})
		if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
			t.Fatalf("refund: %s", res)
		}
		hops := f.proxy.Calls("create_refund_draft")
		if len(hops) != 2 || hops[0].Answered || !hops[1].Answered || hops[0].Replica == hops[1].Replica {
			t.Fatalf("want the question from one replica and the answer to the other, got %+v", hops)
		}
		if n := h.asked.Load(); n != 1 {
			t.Errorf("asked %d times, want 1", n)
		}
		if n := f.runs.Load(); n != 1 {
			t.Errorf("%d executions, want 1", n)
		}
	})
}

// The replica that asked is restarted between the question and the answer
// (its memory is gone): one question, one execution, no error.
func TestFleetAskerRestarted(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		f := newFleet(t, rdb, tgmcp.Options{})
		h := &human{}
		h.before = func(int64) { f.restart(f.lastCall("create_refund_draft")) }
		cs := f.connect(t, "token-a", h, "", false)
		res := mustCall(t, cs, &sdk.CallToolParams{Name: "create_refund_draft", Arguments: refund7})
		if res.Code != guard.CodeOK {
			t.Fatalf("refund: %s", res)
		}
		asker := f.proxy.Calls("create_refund_draft")[0].Replica
		if f.replicas[asker].starts != 2 {
			t.Fatalf("the asking replica was started %d times, want 2", f.replicas[asker].starts)
		}
		if n, runs := h.asked.Load(), f.runs.Load(); n != 1 || runs != 1 {
			t.Errorf("asked %d times and %d executions, want 1 and 1", n, runs)
		}
	})
}

// mini returns a client of a miniredis of the test's own.
func mini(t testing.TB) redis.UniversalClient {
	_, rdb := redistest.Mini(t)
	return rdb
}

// stepClock is a clock that moves when the test says.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// waitStarted waits until a write waits at the gate.
func (f *fleet) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no write started within 10 s")
	}
}
