package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/mcptest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// The ports of the fleet of processes: a Redis of its own, two replicas of
// this server, the round-robin balancer in front of them (with the test's
// control endpoints beside it, for the Node client).
const (
	fleetRedisPort = 19510
	fleetBalancer  = "127.0.0.1:19513"
	fleetToken     = "fleet-token"
)

var fleetReplicas = [2]string{"127.0.0.1:19511", "127.0.0.1:19512"}

// procFleet is two processes of this server over one real Redis and one
// TOOLGUARD_MCP_KEY, as an operator runs them, behind a round-robin
// balancer. A replica is killed with SIGKILL and started again on its
// address. Every execution of a write is counted from the replicas' logs
// ("mcp-server: executed …"), across restarts.
type procFleet struct {
	t     *testing.T
	bin   string
	env   []string
	lb    *mcptest.Balancer
	url   string // the balancer's endpoint
	mu    sync.Mutex
	procs [2]*exec.Cmd
	execs atomic.Int64
}

// newProcFleet builds the server, starts a redis-server and two replicas
// and the balancer. It skips without redis-server.
func newProcFleet(t *testing.T) *procFleet {
	t.Helper()
	redistest.NeedBinaries(t, "redis-server")
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcp-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redisURL := startRedisServer(t, fleetRedisPort, dir)
	f := &procFleet{t: t, bin: bin, env: append(os.Environ(),
		"TOOLGUARD_REDIS_URL="+redisURL, "REDIS_URL=",
		"TOOLGUARD_MCP_KEY="+strings.Repeat("5eed", 16))}
	for i := range f.procs {
		f.start(i)
	}
	t.Cleanup(func() {
		for i := range f.procs {
			f.kill(i)
		}
	})
	f.lb = mcptest.NewBalancer("http://"+fleetReplicas[0], "http://"+fleetReplicas[1])
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.lb)
	mux.HandleFunc("POST /fleet/restart-asker", func(w http.ResponseWriter, _ *http.Request) {
		calls := f.lb.Calls("create_refund_draft")
		if len(calls) == 0 {
			http.Error(w, "no question asked yet", http.StatusConflict)
			return
		}
		i := calls[len(calls)-1].Replica
		f.restart(i)
		fmt.Fprintf(w, `{"restarted":%d}`, i)
	})
	mux.HandleFunc("GET /fleet/state", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"executions": f.execs.Load(), "refunds": f.lb.Calls("create_refund_draft")})
	})
	ln, err := net.Listen("tcp", fleetBalancer)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	f.url = "http://" + fleetBalancer + "/mcp"
	return f
}

// startRedisServer starts a redis-server of the test's own on port, with
// nothing persisted, and returns its URL; it is stopped when the test
// ends.
func startRedisServer(t *testing.T, port int, dir string) string {
	t.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	if !redistest.WaitUntil(10*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }) {
		t.Fatalf("redis-server on port %d did not answer", port)
	}
	return url
}

// start starts replica i and waits until it listens; its log lines are
// read for executions, and passed to the test's log.
func (f *procFleet) start(i int) {
	f.t.Helper()
	cmd := exec.Command(f.bin, "-http", fleetReplicas[i], "-token", fleetToken)
	cmd.Env = f.env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "mcp-server: executed ") {
				f.execs.Add(1)
			}
			if strings.Contains(line, "listening on") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		f.t.Fatalf("replica %d did not start", i)
	}
	f.mu.Lock()
	f.procs[i] = cmd
	f.mu.Unlock()
}

// kill stops replica i with SIGKILL: nothing of it is saved on the way
// out.
func (f *procFleet) kill(i int) {
	f.mu.Lock()
	cmd := f.procs[i]
	f.procs[i] = nil
	f.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// restart kills replica i and starts it again.
func (f *procFleet) restart(i int) {
	f.kill(i)
	f.start(i)
}

type bearerTransport struct{}

func (bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+fleetToken)
	return http.DefaultTransport.RoundTrip(r)
}

// connect connects go-sdk's client to the fleet through the balancer, on
// the protocol version given ("" for 2026-07-28), answering every
// question yes after before (if set); manual disables its multi
// round-trip loop.
func (f *procFleet) connect(t *testing.T, version string, asked *atomic.Int64, before func(), manual bool) (*sdk.ClientSession, error) {
	t.Helper()
	copts := &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked.Add(1)
		if before != nil {
			before()
		}
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}}
	if manual {
		copts.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "fleet", Version: "v0"}, copts).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearerTransport{}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// refund calls create_refund_draft for ORDER-7 with reason.
func refund(cs *sdk.ClientSession, reason string) (*guard.Result, error) {
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft",
		Arguments: map[string]any{"order_ref": "ORDER-7", "reason": reason}})
	if err != nil {
		return nil, err
	}
	return tgmcp.ModelResult(r)
}

// counts returns how many questions were asked and writes executed since
// a mark.
type counts struct{ asked, execs int64 }

// The cases on processes of this server: two replicas over one
// Redis behind a round-robin balancer, go-sdk v1.8.0's client on protocol
// 2026-07-28 (its own multi round-trip loop, and by hand), the Tasks
// extension's messages, a 2025-11-25 client with and without session
// affinity, and the official TypeScript SDK.
func TestFleetOfProcesses(t *testing.T) {
	f := newProcFleet(t)
	var asked atomic.Int64
	mark := func() counts { return counts{asked.Load(), f.execs.Load()} }
	want := func(t *testing.T, from counts, questions, execs int64) {
		t.Helper()
		// A replica logs its execution before it answers, and the log is
		// read by another goroutine: wait for the lines to be counted.
		redistest.WaitUntil(2*time.Second, func() bool { return f.execs.Load()-from.execs >= execs })
		if q, e := asked.Load()-from.asked, f.execs.Load()-from.execs; q != questions || e != execs {
			t.Fatalf("%d questions and %d executions, want %d and %d", q, e, questions, execs)
		}
	}

	t.Run("the answer reaches the other replica", func(t *testing.T) {
		cs, err := f.connect(t, "", &asked, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("protocol %s", v)
		}
		from := mark()
		res, err := refund(cs, "duplicate")
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("refund: %v %v", res, err)
		}
		calls := f.lb.Calls("create_refund_draft")
		if q, a := calls[len(calls)-2], calls[len(calls)-1]; q.Answered || !a.Answered || q.Replica == a.Replica {
			t.Fatalf("want the question from one replica and the answer to the other: %+v %+v", q, a)
		}
		want(t, from, 1, 1)
	})

	t.Run("the asker is killed and started again before the answer", func(t *testing.T) {
		var restarted int
		before := func() {
			calls := f.lb.Calls("create_refund_draft")
			restarted = calls[len(calls)-1].Replica
			f.restart(restarted)
		}
		cs, err := f.connect(t, "", &asked, before, false)
		if err != nil {
			t.Fatal(err)
		}
		from := mark()
		res, err := refund(cs, "damaged")
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("refund: %v %v", res, err)
		}
		want(t, from, 1, 1)
	})

	t.Run("a request state used for another call is refused", func(t *testing.T) {
		cs, err := f.connect(t, "", &asked, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		from := mark()
		args := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft", Arguments: args})
		if err != nil || !r.NeedsInput() {
			t.Fatalf("want a question: %+v %v", r, err)
		}
		yes := sdk.InputResponseMap{"toolguard_approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
		other := map[string]any{"order_ref": "ORDER-7", "reason": "not_received"}
		_, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft", Arguments: other, InputResponses: yes, RequestState: r.RequestState})
		if mcptest.DataType(err) != "request_state_other_call" {
			t.Fatalf("the state for other arguments: %v", err)
		}

		// The answer's response is lost; the call re-issued replays.
		f.lb.Set(func(b *mcptest.Balancer) { b.Lose = func(h mcptest.Hop) bool { return h.Answered } })
		_, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft", Arguments: args, InputResponses: yes, RequestState: r.RequestState})
		f.lb.Set(func(b *mcptest.Balancer) { b.Lose = nil })
		if err == nil {
			t.Fatal("the lost response reached the client")
		}
		again, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft", Arguments: args, InputResponses: yes, RequestState: r.RequestState})
		res, _ := tgmcp.ModelResult(again)
		if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
			t.Fatalf("re-issued: %v %v, want OK replayed", res, err)
		}
		want(t, from, 0, 1)
	})

	t.Run("the answer POSTed to both replicas runs once", func(t *testing.T) {
		f.lb.Set(func(b *mcptest.Balancer) { b.Twice = func(h mcptest.Hop) bool { return h.Answered } })
		defer f.lb.Set(func(b *mcptest.Balancer) { b.Twice = nil })
		cs, err := f.connect(t, "", &asked, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		from := mark()
		res, err := refund(cs, "not_received")
		if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
			t.Fatalf("refund: %v %v, want OK replayed by the second replica", res, err)
		}
		want(t, from, 1, 1)
	})

	t.Run("idempotencyKey replays on the other replica, and conflicts for other arguments", func(t *testing.T) {
		w := &mcptest.Wire{TB: t, URL: f.url, Token: fleetToken, Caps: map[string]any{"elicitation": map[string]any{}}}
		from := mark()
		args := map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}
		q := w.Must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args, "idempotencyKey": "fleet-key-1"})
		if q["resultType"] != "input_required" {
			t.Fatalf("want a question: %v", q)
		}
		answered := w.Must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args, "idempotencyKey": "fleet-key-1",
			"requestState": q["requestState"], "inputResponses": map[string]any{"toolguard_approval": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}})
		replay := w.Must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args, "idempotencyKey": "fleet-key-1"})
		if delivery(answered) != "fresh" || delivery(replay) != "local_replay" {
			t.Fatalf("keyed: %v then %v, want fresh then local_replay", answered, replay)
		}
		_, rerr := w.Call("tools/call", map[string]any{"name": "create_refund_draft", "arguments": map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}, "idempotencyKey": "fleet-key-1"})
		if rerr == nil || !strings.Contains(string(rerr.Data), `"type":"idempotency_key_conflict"`) {
			t.Fatalf("other arguments: %+v, want idempotency_key_conflict", rerr)
		}
		want(t, from, 0, 1)
	})

	t.Run("a task polled on both replicas across a restart of both", func(t *testing.T) {
		w := &mcptest.Wire{TB: t, URL: f.url, Token: fleetToken, Caps: mcptest.TasksCaps()}
		from := mark()
		id := w.CreateTask("create_refund_draft", map[string]any{"order_ref": "ORDER-7", "reason": "damaged"})["taskId"].(string)
		for range 2 {
			if got := w.Get(id); got["status"] != "input_required" {
				t.Fatalf("tasks/get: %v", got)
			}
		}
		f.restart(0)
		f.restart(1)
		w.Answer(id, true)
		for range 2 {
			var res guard.Result
			if err := json.Unmarshal(mcptest.TaskResult(t, w.Get(id)), &res); err != nil || res.Code != guard.CodeOK {
				t.Fatalf("the task's result: %v %v", res, err)
			}
		}
		want(t, from, 0, 1)
	})

	t.Run("2025-11-25 needs session affinity", func(t *testing.T) {
		if _, err := f.connect(t, "2025-11-25", &asked, nil, false); err == nil || !strings.Contains(err.Error(), "session not found") {
			t.Fatalf("a 2025-11-25 session through round robin without affinity: %v, want its other replica's 404, session not found", err)
		}
		f.lb.Set(func(b *mcptest.Balancer) { b.Affinity = true })
		defer f.lb.Set(func(b *mcptest.Balancer) { b.Affinity = false })
		cs, err := f.connect(t, "2025-11-25", &asked, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		from := mark()
		for i, want := range []guard.Delivery{guard.DeliveryFresh, guard.DeliveryLocalReplay} {
			res, err := refund(cs, "duplicate")
			if err != nil || res.Code != guard.CodeOK || res.Delivery != want {
				t.Fatalf("refund %d in the session: %v %v, want OK %s", i, res, err, want)
			}
		}
		want(t, from, 1, 1)
	})

	t.Run("the official TypeScript SDK", func(t *testing.T) {
		node := nodeModules(t, "client")
		from := mark()
		cmd := exec.Command(node, "fleet.mjs", f.url, "http://"+fleetBalancer+"/fleet", fleetToken)
		cmd.Dir = nodeCheck
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "mcp-fleet: all") {
			t.Fatalf("node fleet.mjs: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		if e := f.execs.Load() - from.execs; e != 3 {
			t.Fatalf("%d executions behind the TypeScript client's three refunds, want 3", e)
		}
	})
}

// delivery returns the delivery of the model result of a tools/call
// result as the wire gave it.
func delivery(res map[string]any) string {
	sc, _ := res["structuredContent"].(map[string]any)
	d, _ := sc["delivery"].(string)
	return d
}
