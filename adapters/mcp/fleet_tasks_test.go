package tgmcp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/mcptest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// wire returns a client of the fleet that writes 2026-07-28's messages
// itself, for the Tasks extension.
func (f *fleet) wire(t *testing.T, token string, caps map[string]any) *mcptest.Wire {
	return &mcptest.Wire{TB: t, URL: f.url, Token: token, Caps: caps}
}

// taskModelResult returns the model result of a completed task.
func taskModelResult(t *testing.T, task map[string]any) *guard.Result {
	t.Helper()
	var res guard.Result
	if err := json.Unmarshal(mcptest.TaskResult(t, task), &res); err != nil {
		t.Fatal(err)
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
		c := f.wire(t, "token-a", mcptest.TasksCaps())
		created := c.CreateTask("create_refund_draft", refund7)
		id := created["taskId"].(string)
		for range 2 { // both replicas
			got := c.Get(id)
			ir, _ := got["inputRequests"].(map[string]any)["toolguard_approval"].(map[string]any)
			msg, _ := ir["params"].(map[string]any)["message"].(string)
			if got["status"] != "input_required" || ir["method"] != "elicitation/create" || !strings.Contains(msg, `create_refund_draft with arguments {"order_ref":"ORDER-7","reason":"duplicate"}`) {
				t.Fatalf("tasks/get: %v, want the approval question", got)
			}
		}
		f.restart(0)
		f.restart(1)
		if got := c.Get(id); got["status"] != "input_required" {
			t.Fatalf("after the restarts: %v", got)
		}
		c.Answer(id, true)
		var results []string
		for range 2 {
			res := taskModelResult(t, c.Get(id))
			if res.Code != guard.CodeOK {
				t.Fatalf("the task's result: %s", res)
			}
			results = append(results, string(res.Data))
		}
		if results[0] != results[1] {
			t.Fatalf("the replicas disagree: %v", results)
		}
		c.Answer(id, true) // an answer to a question no longer asked: ignored
		if n := f.runs.Load(); n != 1 {
			t.Fatalf("%d executions, want 1", n)
		}
		gets := 0
		for _, h := range f.proxy.Hops("tasks/get") {
			if h.Task == id {
				gets |= 1 << h.Replica
			}
		}
		if gets != 3 {
			t.Fatalf("tasks/get did not reach both replicas (%b)", gets)
		}

		// Another principal, and a client that did not declare the
		// extension, get nothing of it.
		if _, rerr := f.wire(t, "token-b", mcptest.TasksCaps()).Call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32602 {
			t.Fatalf("tenant-b's tasks/get: %+v, want -32602", rerr)
		}
		if _, rerr := f.wire(t, "token-a", map[string]any{}).Call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32021 ||
			!strings.Contains(string(rerr.Data), tgmcp.TasksExtension) {
			t.Fatalf("tasks/get without the extension: %+v, want -32021 naming it", rerr)
		}
		if _, rerr := c.Call("tasks/get", map[string]any{"taskId": "task_nope"}); rerr == nil || rerr.Code != -32602 {
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
	c := f.wire(t, "token-a", mcptest.TasksCaps())
	args := func(reason string) map[string]any { return map[string]any{"order_ref": "ORDER-7", "reason": reason} }

	declined := c.CreateTask("create_refund_draft", args("duplicate"))["taskId"].(string)
	c.Answer(declined, false)
	if res := taskModelResult(t, c.Get(declined)); res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Fatalf("declined: %s", res)
	}

	cancelled := c.CreateTask("create_refund_draft", args("damaged"))["taskId"].(string)
	if ack := c.Must("tasks/cancel", map[string]any{"taskId": cancelled}); ack["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v", ack)
	}
	c.Answer(cancelled, true)
	if got := c.Get(cancelled); got["status"] != "cancelled" {
		t.Fatalf("cancelled: %v", got)
	}

	// The same keyed operation twice while its task waits: one task.
	keyed := map[string]any{"name": "create_refund_draft", "arguments": args("not_received"), "idempotencyKey": "refund-77"}
	first := c.Must("tools/call", keyed)
	second := c.Must("tools/call", keyed)
	if first["taskId"] != second["taskId"] || first["taskId"] == nil {
		t.Fatalf("the same operation twice: tasks %v and %v, want one", first["taskId"], second["taskId"])
	}
	expired := first["taskId"].(string)
	clock.add(10*time.Minute + time.Millisecond)
	if res := taskModelResult(t, c.Get(expired)); res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
		t.Fatalf("expired: %s", res)
	}
	c.Answer(expired, true)
	if res := taskModelResult(t, c.Get(expired)); res.Message != guard.ExpiredMessage {
		t.Fatalf("expired, then answered: %s", res)
	}

	noTasks := f.wire(t, "token-a", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	res := noTasks.Must("tools/call", map[string]any{"name": "create_refund_draft", "arguments": args("duplicate")})
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
	// Backends a TCP proxy can stand before: one address.
	t.Run(redistest.BackendMiniredis, func(t *testing.T) { taskRunTakenOver(t, mini(t)) })
	t.Run(redistest.BackendStandalone, func(t *testing.T) { taskRunTakenOver(t, redistest.Standalone(t)) })
}

func taskRunTakenOver(t *testing.T, rdb redis.UniversalClient) {
	clock := &stepClock{now: time.Now()}
	f := newFleet(t, rdb, tgmcp.Options{Clock: clock})
	cut := redistest.NewProxy(t, rdb.(*redis.Client).Options().Addr)
	through := redis.NewClient(&redis.Options{Addr: cut.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = through.Close() })
	f.restartWith(0, through)
	c := f.wire(t, "token-a", mcptest.TasksCaps())
	id := c.CreateTask("create_refund_draft", refund7)["taskId"].(string)
	cut.Cut()
	f.proxy.Route = func(h mcptest.Hop) int {
		if h.Method == "tasks/update" {
			return 0
		}
		return 1
	}
	c.Answer(id, true)
	if got := c.Get(id); got["status"] != "working" || f.runs.Load() != 0 {
		t.Fatalf("after the cut: %v, %d executions; want working, none", got, f.runs.Load())
	}
	cut.Restore()
	clock.add(3 * time.Second)
	if res := taskModelResult(t, c.Get(id)); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("taken over: %s", res)
	}

	// A run that holds the operation while another replica polls.
	id = c.CreateTask("create_refund_draft", map[string]any{"order_ref": "ORDER-7", "reason": "damaged"})["taskId"].(string)
	gate := make(chan struct{})
	f.gate.Store(&gate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Answer(id, true)
	}()
	f.waitStarted(t)
	clock.add(time.Minute)
	if got := c.Get(id); got["status"] != "working" {
		t.Fatalf("polled while running: %v", got)
	}
	close(gate)
	<-done
	f.gate.Store(nil)
	if res := taskModelResult(t, c.Get(id)); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("after the run: %s", res)
	}
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
}

// A task is served to tokens that may call its tool: one without the
// tool's scope (Options.ToolScopes) can neither answer nor read the task
// of its own principal, and nothing runs until a token with it answers.
func TestFleetTaskNeedsTheToolsScopes(t *testing.T) {
	f := newFleet(t, mini(t), tgmcp.Options{ToolScopes: map[string][]string{"create_refund_draft": {"orders:refund"}}})
	refunder := f.wire(t, "token-a-refund", mcptest.TasksCaps())
	reader := f.wire(t, "token-a-read", mcptest.TasksCaps())
	id := refunder.CreateTask("create_refund_draft", refund7)["taskId"].(string)
	yes := map[string]any{"toolguard_approval": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	for method, params := range map[string]map[string]any{
		"tasks/update": {"taskId": id, "inputResponses": yes},
		"tasks/get":    {"taskId": id},
		"tasks/cancel": {"taskId": id},
	} {
		if _, rerr := reader.Call(method, params); rerr == nil || !strings.Contains(rerr.Message, "insufficient scope") {
			t.Fatalf("%s with orders:read only: %+v, want refused for insufficient scope", method, rerr)
		}
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("%d executions, want 0", n)
	}
	refunder.Answer(id, true)
	if res := taskModelResult(t, refunder.Get(id)); res.Code != guard.CodeOK || f.runs.Load() != 1 {
		t.Fatalf("answered with the scope: %s, %d executions", res, f.runs.Load())
	}
}
