package tgmcp_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/redistest"
)

// wireClient speaks protocol 2026-07-28 as the specification writes its
// messages (SEP-2575's per-request _meta and headers), for what go-sdk's
// client cannot send or read: the Tasks extension's methods, and a
// tools/call answered with a task.
type wireClient struct {
	t     *testing.T
	url   string
	token string
	caps  map[string]any
	mu    sync.Mutex
	id    int
}

// tasksCaps are the per-request capabilities of a client that answers
// elicitations and declares the Tasks extension.
var tasksCaps = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "extensions": map[string]any{tgmcp.TasksExtension: map[string]any{}}}

func (f *fleet) wire(t *testing.T, token string, caps map[string]any) *wireClient {
	return &wireClient{t: t, url: f.url, token: token, caps: caps}
}

// rpcError is a JSON-RPC error as it came.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// call sends one request and returns its result, or its error.
func (c *wireClient) call(method string, params map[string]any) (map[string]any, *rpcError) {
	c.t.Helper()
	c.mu.Lock()
	c.id++
	id := c.id
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": c.caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "wire", "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var last string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		} else if strings.HasPrefix(line, "{") {
			last = line
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *rpcError      `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &msg); err != nil {
		c.t.Fatalf("%s: HTTP %d, answer %q: %v", method, resp.StatusCode, last, err)
	}
	return msg.Result, msg.Error
}

// must is call for a request that must succeed.
func (c *wireClient) must(method string, params map[string]any) map[string]any {
	c.t.Helper()
	res, rerr := c.call(method, params)
	if rerr != nil {
		c.t.Fatalf("%s: error %d %s %s", method, rerr.Code, rerr.Message, rerr.Data)
	}
	return res
}

// get polls the task.
func (c *wireClient) get(id string) map[string]any {
	c.t.Helper()
	return c.must("tasks/get", map[string]any{"taskId": id})
}

// answer sends the human's answer to the task's question.
func (c *wireClient) answer(id string, approve bool) {
	c.t.Helper()
	resp := map[string]any{"action": "decline"}
	if approve {
		resp = map[string]any{"action": "accept", "content": map[string]any{"approve": true}}
	}
	ack := c.must("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"toolguard_approval": resp}})
	if ack["resultType"] != "complete" {
		c.t.Fatalf("tasks/update: %v, want the empty result", ack)
	}
}

// createRefund calls create_refund_draft and returns the task it is
// answered with.
func (c *wireClient) createRefund(args map[string]any) map[string]any {
	c.t.Helper()
	res := c.must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args})
	if res["resultType"] != "task" || res["status"] != "input_required" {
		c.t.Fatalf("tools/call: %v, want a task waiting for input", res)
	}
	for _, k := range []string{"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if res[k] == nil {
			c.t.Fatalf("CreateTaskResult without %s: %v", k, res)
		}
	}
	return res
}

// taskModelResult returns the model result of a completed task.
func taskModelResult(t *testing.T, task map[string]any) *guard.Result {
	t.Helper()
	if task["status"] != "completed" || task["resultType"] != "complete" {
		t.Fatalf("task %v, want completed", task)
	}
	r, _ := task["result"].(map[string]any)
	b, _ := json.Marshal(r["structuredContent"])
	var res guard.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("task result %v: %v", r, err)
	}
	if isErr, _ := r["isError"].(bool); isErr != (res.Code != guard.CodeOK) {
		t.Fatalf("task result isError %v for %s", r["isError"], res.Code)
	}
	return &res
}

// A write that waits on approval is a task (the client declared the
// extension): polled with tasks/get on either replica, through a restart
// of both, to its completed result; one question, one execution. The task
// is its principal's alone.
func TestFleetTaskAcrossRestarts(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		f := newFleet(t, rdb, tgmcp.Options{})
		c := f.wire(t, "token-a", tasksCaps)
		created := c.createRefund(refund7)
		id := created["taskId"].(string)
		for range 2 { // both replicas
			got := c.get(id)
			ir, _ := got["inputRequests"].(map[string]any)["toolguard_approval"].(map[string]any)
			msg, _ := ir["params"].(map[string]any)["message"].(string)
			if got["status"] != "input_required" || ir["method"] != "elicitation/create" || !strings.Contains(msg, `create_refund_draft with arguments {"order_ref":"ORDER-7","reason":"duplicate"}`) {
				t.Fatalf("tasks/get: %v, want the approval question", got)
			}
		}
		f.restart(0)
		f.restart(1)
		if got := c.get(id); got["status"] != "input_required" {
			t.Fatalf("after the restarts: %v", got)
		}
		c.answer(id, true)
		var results []string
		for range 2 {
			res := taskModelResult(t, c.get(id))
			if res.Code != guard.CodeOK {
				t.Fatalf("the task's result: %s", res)
			}
			results = append(results, string(res.Data))
		}
		if results[0] != results[1] {
			t.Fatalf("the replicas disagree: %v", results)
		}
		c.answer(id, true) // an answer to a question no longer asked: ignored
		if n := f.runs.Load(); n != 1 {
			t.Fatalf("%d executions, want 1", n)
		}
		gets := 0
		for _, h := range f.proxy.hops {
			if h.Method == "tasks/get" && h.Task == id {
				gets |= 1 << h.Replica
			}
		}
		if gets != 3 {
			t.Fatalf("tasks/get did not reach both replicas (%b)", gets)
		}

		// Another principal, and a client that did not declare the
		// extension, get nothing of it.
		if _, rerr := f.wire(t, "token-b", tasksCaps).call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32602 {
			t.Fatalf("tenant-b's tasks/get: %+v, want -32602", rerr)
		}
		if _, rerr := f.wire(t, "token-a", map[string]any{}).call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32021 ||
			!strings.Contains(string(rerr.Data), tgmcp.TasksExtension) {
			t.Fatalf("tasks/get without the extension: %+v, want -32021 naming it", rerr)
		}
		if _, rerr := c.call("tasks/get", map[string]any{"taskId": "task_nope"}); rerr == nil || rerr.Code != -32602 {
			t.Fatalf("tasks/get of no task: %+v, want -32602", rerr)
		}
	})
}

// A declined task completes APPROVAL_REQUIRED, declined; an unanswered one
// completes expired after QuestionTTL; a cancelled one is cancelled, and
// answers to it are ignored; none runs. The same operation while its task
// waits gets the same task. A client without the extension is asked with
// a multi round-trip request instead.
func TestFleetTaskOutcomes(t *testing.T) {
	clock := &stepClock{now: time.Now()}
	f := newFleet(t, mini(t), tgmcp.Options{Clock: clock})
	c := f.wire(t, "token-a", tasksCaps)
	args := func(reason string) map[string]any { return map[string]any{"order_ref": "ORDER-7", "reason": reason} }

	declined := c.createRefund(args("duplicate"))["taskId"].(string)
	c.answer(declined, false)
	if res := taskModelResult(t, c.get(declined)); res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Fatalf("declined: %s", res)
	}

	cancelled := c.createRefund(args("damaged"))["taskId"].(string)
	if ack := c.must("tasks/cancel", map[string]any{"taskId": cancelled}); ack["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v", ack)
	}
	c.answer(cancelled, true)
	if got := c.get(cancelled); got["status"] != "cancelled" {
		t.Fatalf("cancelled: %v", got)
	}

	// The same keyed operation twice while its task waits: one task.
	keyed := map[string]any{"name": "create_refund_draft", "arguments": args("not_received"), "idempotencyKey": "refund-77"}
	first := c.must("tools/call", keyed)
	second := c.must("tools/call", keyed)
	if first["taskId"] != second["taskId"] || first["taskId"] == nil {
		t.Fatalf("the same operation twice: tasks %v and %v, want one", first["taskId"], second["taskId"])
	}
	expired := first["taskId"].(string)
	clock.add(10*time.Minute + time.Millisecond)
	if res := taskModelResult(t, c.get(expired)); res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
		t.Fatalf("expired: %s", res)
	}
	c.answer(expired, true)
	if res := taskModelResult(t, c.get(expired)); res.Message != guard.ExpiredMessage {
		t.Fatalf("expired, then answered: %s", res)
	}

	noTasks := f.wire(t, "token-a", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	res := noTasks.must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args("duplicate")})
	if res["resultType"] != "input_required" || res["requestState"] == nil || res["taskId"] != nil {
		t.Fatalf("a client without the extension: %v, want a multi round-trip question", res)
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("%d executions, want 0", n)
	}
}

// The replica running an approved task's write loses its Redis before the
// guard records anything (nothing runs: UNAVAILABLE), so the task stays
// working; a poll on the other replica after a while runs it: one
// execution. A poll while the first run still holds the operation (its
// lease over by the server's clock, not the guard's) runs nothing more.
func TestFleetTaskRunTakenOver(t *testing.T) {
	rdb := redistest.Standalone(t)
	clock := &stepClock{now: time.Now()}
	f := newFleet(t, rdb, tgmcp.Options{Clock: clock})
	cut := redistest.NewProxy(t, rdb.(*redis.Client).Options().Addr)
	through := redis.NewClient(&redis.Options{Addr: cut.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = through.Close() })
	f.restartWith(0, through)
	c := f.wire(t, "token-a", tasksCaps)
	id := c.createRefund(refund7)["taskId"].(string)
	cut.Cut()
	f.proxy.route = func(h hop) int {
		if h.Method == "tasks/update" {
			return 0
		}
		return 1
	}
	c.answer(id, true)
	if got := c.get(id); got["status"] != "working" || f.runs.Load() != 0 {
		t.Fatalf("after the cut: %v, %d executions; want working, none", got, f.runs.Load())
	}
	cut.Restore()
	clock.add(3 * time.Second)
	if res := taskModelResult(t, c.get(id)); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("taken over: %s", res)
	}

	// A run that holds the operation while another replica polls.
	id = c.createRefund(map[string]any{"order_ref": "ORDER-7", "reason": "damaged"})["taskId"].(string)
	gate := make(chan struct{})
	f.gate.Store(&gate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.answer(id, true)
	}()
	f.waitStarted(t)
	clock.add(time.Minute)
	if got := c.get(id); got["status"] != "working" {
		t.Fatalf("polled while running: %v", got)
	}
	close(gate)
	<-done
	f.gate.Store(nil)
	if res := taskModelResult(t, c.get(id)); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("after the run: %s", res)
	}
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
}
