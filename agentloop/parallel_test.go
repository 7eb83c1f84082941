package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// gate is a read tool whose calls block until the test lets each go, and
// which counts how many are in flight at once.
type gate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	max      int
	entered  []string
	release  map[string]chan struct{}
}

type gateIn struct {
	ID string `json:"id"`
}

func newGate(ids ...string) *gate {
	g := &gate{release: map[string]chan struct{}{}}
	g.cond = sync.NewCond(&g.mu)
	for _, id := range ids {
		g.release[id] = make(chan struct{})
	}
	return g
}

func (g *gate) tool() toolset.Declared {
	return toolset.Read("wait", "Waits.", func(ctx context.Context, _ *guard.Invocation, in gateIn) (string, error) {
		g.mu.Lock()
		g.inFlight++
		g.max = max(g.max, g.inFlight)
		g.entered = append(g.entered, in.ID)
		g.cond.Broadcast()
		ch := g.release[in.ID]
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
		return "done " + in.ID, nil
	}, nil)
}

// await waits until n calls are in flight at once, or the test's context
// ends.
func (g *gate) await(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	stop := context.AfterFunc(ctx, func() { g.mu.Lock(); g.cond.Broadcast(); g.mu.Unlock() })
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.inFlight < n {
		if ctx.Err() != nil {
			t.Fatalf("%d calls in flight (entered %v), never %d", g.inFlight, g.entered, n)
		}
		g.cond.Wait()
	}
}

func waitCalls(ids ...string) fakemodel.Turn {
	var cs []fakemodel.Call
	for _, id := range ids {
		cs = append(cs, call("call_"+id, "wait", fmt.Sprintf(`{"id":%q}`, id)))
	}
	return calls(cs...)
}

func gateLoop(t *testing.T, w *world, g *gate, opts agentloop.Options) *agentloop.Loop {
	t.Helper()
	tools, err := orders.Tools(w.svc).With(g.tool())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Store == nil {
		opts.Store = w.store()
	}
	return agentloop.New(model(w.client), tools, opts)
}

// The calls of one reply run at once: all three are in flight together
// (the tools wait for each other), they finish in reverse order, and yet
// the transcript and the outputs sent back keep the provider's order.
func TestReplyCallsRunAtOnce(t *testing.T) {
	w := newWorld(t, waitCalls("a", "b", "c"), fakemodel.Turn{Text: "all done"})
	g := newGate("a", "b", "c")
	ctx := testCtx(t)
	type ran struct {
		res *agentloop.RunResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := gateLoop(t, w, g, agentloop.Options{}).Run(ctx, user1, "wait for all")
		done <- ran{res, err}
	}()
	g.await(ctx, t, 3)
	for _, id := range []string{"c", "b", "a"} {
		close(g.release[id])
	}
	r := <-done
	if r.err != nil || r.res.Status != agentloop.StatusCompleted {
		t.Fatalf("%+v %v", r.res, r.err)
	}
	if got := kinds(r.res.Transcript); got != "user,call,result,call,result,call,result,message" {
		t.Errorf("transcript %s\n%s", got, r.res.Transcript)
	}
	var order []string
	for _, ev := range r.res.Transcript {
		if ev.Kind == agentloop.EventCall || ev.Kind == agentloop.EventResult {
			order = append(order, ev.CallID)
		}
	}
	if strings.Join(order, ",") != "call_a,call_a,call_b,call_b,call_c,call_c" {
		t.Errorf("event order %v", order)
	}
	outs := outputsOf(t, w.srv.Requests()[1])
	if len(outs) != 3 || outs[0].CallID != "call_a" || outs[1].CallID != "call_b" || outs[2].CallID != "call_c" ||
		string(outs[2].Result.Data) != `"done c"` {
		t.Errorf("outputs %+v", outs)
	}
}

// Options.Parallel bounds the calls in flight: with 2, the third call
// starts only when one of the first two has finished; with 1, they run one
// after another, in order.
func TestParallelBound(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			w := newWorld(t, waitCalls("a", "b", "c"), fakemodel.Turn{Text: "all done"})
			g := newGate("a", "b", "c")
			ctx := testCtx(t)
			done := make(chan error, 1)
			go func() {
				_, err := gateLoop(t, w, g, agentloop.Options{Parallel: limit}).Run(ctx, user1, "wait")
				done <- err
			}()
			g.await(ctx, t, limit)
			for _, id := range []string{"a", "b", "c"} {
				close(g.release[id])
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if g.max != limit {
				t.Errorf("%d calls in flight at once, limit %d", g.max, limit)
			}
			if limit == 1 && strings.Join(g.entered, "") != "abc" {
				t.Errorf("entered in order %v", g.entered)
			}
		})
	}
}

// concurrency counts overlapping calls of an Approver and the transcript
// it saw when asked.
type serialApprover struct {
	mu      sync.Mutex
	active  int
	overlap bool
	asked   []string
	results []int // results in the transcript when asked
	seen    int
}

func (a *serialApprover) Approve(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
	a.mu.Lock()
	a.active++
	a.overlap = a.overlap || a.active > 1
	a.asked = append(a.asked, req.CallID)
	a.results = append(a.results, a.seen)
	a.mu.Unlock()
	a.mu.Lock()
	a.active--
	a.mu.Unlock()
	return host.Decision{Approved: true, Approver: "ann"}, nil
}

func (a *serialApprover) observe(e agentloop.Event) {
	if e.Kind == agentloop.EventResult {
		a.mu.Lock()
		a.seen++
		a.mu.Unlock()
	}
}

// Writes that need a human are put to the Approver one at a time, in the
// provider's order, each once every call before it has finished; the same
// intent twice in one reply runs once, the second replaying the first
// (never IN_PROGRESS).
func TestApprovalsInAParallelReply(t *testing.T) {
	damaged := `{"order_ref":"ORDER-7","reason":"damaged"}`
	w := newWorld(t,
		calls(call("r1", readTool, readArgs), call("w1", refundTool, refundArgs), call("w2", refundTool, damaged),
			call("w3", refundTool, refundArgs)),
		fakemodel.Turn{Text: "drafted"},
	)
	a := &serialApprover{}
	res, err := w.loop(agentloop.Options{Approver: a, Observer: a.observe}).Run(testCtx(t), user1, "refund twice")
	if err != nil || res.Status != agentloop.StatusCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	if a.overlap {
		t.Error("the Approver was asked for two calls at once")
	}
	if strings.Join(a.asked, ",") != "w1,w2" || a.results[0] != 1 || a.results[1] != 2 {
		t.Errorf("asked %v with %v results before each", a.asked, a.results)
	}
	if w.svc.SideEffects() != 2 {
		t.Errorf("%d drafts", w.svc.SideEffects())
	}
	outs := outputsOf(t, w.srv.Requests()[1])
	if len(outs) != 4 || outs[3].CallID != "w3" || outs[3].Result.Delivery != guard.DeliveryLocalReplay || outs[1].Result.Delivery != guard.DeliveryFresh {
		t.Errorf("outputs %+v", outs)
	}
}

// Without an Approver, a reply with a read and two writes that need a
// human pauses once the read has finished, with both requests pending in
// the provider's order.
func TestPauseAfterTheOthersFinish(t *testing.T) {
	damaged := `{"order_ref":"ORDER-7","reason":"damaged"}`
	w := newWorld(t, calls(call("w1", refundTool, refundArgs), call("a", "wait", `{"id":"a"}`), call("w2", refundTool, damaged)))
	g := newGate("a")
	close(g.release["a"])
	res, err := gateLoop(t, w, g, agentloop.Options{}).Run(testCtx(t), user1, "refund")
	if err != nil || res.Status != agentloop.StatusPaused {
		t.Fatalf("%+v %v", res, err)
	}
	if len(res.Pending) != 2 || res.Pending[0].CallID != "w1" || res.Pending[1].CallID != "w2" {
		t.Errorf("pending %+v", res.Pending)
	}
	b, _ := json.Marshal(res.State)
	if !strings.Contains(string(b), `done a`) {
		t.Errorf("the read's result is not in the paused state: %s", b)
	}
}
