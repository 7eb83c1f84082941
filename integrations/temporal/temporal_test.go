package tgtemporal_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/interceptor"

	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

func refundScript() []openaitest.Turn {
	return []openaitest.Turn{
		{Calls: []openaitest.Call{{CallID: "c1", Name: readTool, Arguments: readArgs}}},
		{Calls: []openaitest.Call{{CallID: "c2", Name: refundTool, Arguments: refundDup}}},
		{Text: "The refund draft is ready."},
	}
}

var yes = host.Decision{Approved: true, Approver: "ann"}

// checkOnce checks a run of refundScript: completed, the write run once,
// and the model given the write's result (the stored one: its draft).
func checkOnce(t *testing.T, w *world, res *durable.Result) guard.Result {
	t.Helper()
	if res.Status != durable.StatusCompleted || len(res.Calls) != 2 || res.Calls[1].Code != "OK" || !res.Calls[1].Asked {
		t.Fatalf("result %+v", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects %d, want 1", n)
	}
	got := outputs(t, w.srv)["c2"]
	var d orders.Draft
	if got.Code != guard.CodeOK || json.Unmarshal(got.Data, &d) != nil || d.ID == "" || d.OrderRef != "ORDER-7" {
		t.Errorf("the model got %+v for the write, want its draft", got)
	}
	return got
}

// TestWorkflowApprovedWriteRunsOnce: a read, then a write a human approves
// through the query and the signal, from outside the workflow.
func TestWorkflowApprovedWriteRunsOnce(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	e := env(t, w.runner(), tgtemporal.Options{}, "run-1")
	asked := approveWhenAsked(t, e, yes)
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-1", Principal: user1, Input: "Refund ORDER-7."})
	res := result(t, e)
	got := checkOnce(t, w, res)
	if got.Delivery != guard.DeliveryFresh {
		t.Errorf("delivery %s, want fresh", got.Delivery)
	}
	if len(*asked) != 1 || (*asked)[0].RunID != "run-1" || (*asked)[0].Tool != refundTool {
		t.Errorf("asked %+v", *asked)
	}
}

// TestRetryAfterSideEffect: the dispatch attempt that carries the yes runs
// the tool, then its completion is lost (the activity fails after the side
// effect, as when the worker's reply to the server is lost). Temporal
// retries it; the retry replays the stored outcome.
func TestRetryAfterSideEffect(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	f := &faultyDispatch{fault: func(n int, ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error) {
		out, err := next.ExecuteActivity(ctx, in)
		if n == 1 && err == nil {
			return nil, lostReply("the completion of the attempt was lost")
		}
		return out, err
	}}
	e := env(t, w.runner(), fastRetries(), "run-lost", f)
	approveWhenAsked(t, e, yes)
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-lost", Principal: user1, Input: "Refund ORDER-7."})
	got := checkOnce(t, w, result(t, e))
	if f.count() != 2 {
		t.Errorf("%d attempts of the decision's dispatch, want 2", f.count())
	}
	if got.Delivery == guard.DeliveryFresh {
		t.Errorf("delivery %s: the model must be given the stored result", got.Delivery)
	}
}

// TestRetryAfterTimeout: the first attempt outlives its start-to-close
// timeout: the tool ran, and its reply hangs. The server gives up on the
// attempt and retries while the first one still runs (the testsuite does
// not retry a timed-out activity, so the interceptor plays the server: it
// gives up on attempt 1 once the tool has run, leaving it running). The
// retry finds the operation in progress and fails retryably; once attempt
// 1 stores its outcome, the next retry replays it.
func TestRetryAfterTimeout(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	hang := make(chan struct{})
	w.tools = hangingTools(hang)
	first := make(chan error, 1)
	f := &faultyDispatch{}
	f.fault = func(n int, ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error) {
		switch n {
		case 1:
			go func() {
				_, err := next.ExecuteActivity(context.WithoutCancel(ctx), in)
				first <- err
			}()
			// The tool has run when the draft exists; the attempt's reply
			// hangs (hang) past the timeout.
			for w.svc.SideEffects() == 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				default:
				}
			}
			return nil, lostReply("start-to-close timeout")
		case 2:
			out, err := next.ExecuteActivity(ctx, in)
			if err == nil || !strings.Contains(err.Error(), "another attempt") {
				t.Errorf("attempt 2 while attempt 1 runs: %v, want the in-progress error", err)
			}
			close(hang)
			if err := <-first; err != nil {
				t.Errorf("attempt 1: %v", err)
			}
			return out, err
		}
		return next.ExecuteActivity(ctx, in)
	}
	e := env(t, w.runner(), fastRetries(), "run-timeout", f)
	approveWhenAsked(t, e, yes)
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-timeout", Principal: user1, Input: "Refund ORDER-7."})
	got := checkOnce(t, w, result(t, e))
	if f.count() != 3 {
		t.Errorf("%d attempts, want 3", f.count())
	}
	if got.Delivery == guard.DeliveryFresh {
		t.Errorf("delivery %s: the model must be given the stored result", got.Delivery)
	}
}

// TestWorkerRestartedMidActivity: worker A runs the attempt (the tool
// runs, the outcome is stored in Redis) and dies before Temporal records
// the attempt; the retry runs on worker B, a new process: its own guard,
// host and Redis connection over the same Redis and downstream. B replays
// the stored outcome.
func TestWorkerRestartedMidActivity(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		w := newWorld(t, redisStore(t, rdb), refundScript()...)
		b := &tgtemporal.Activities{Runner: w.runner()}
		f := &faultyDispatch{fault: func(n int, ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error) {
			if n == 1 {
				_, _ = next.ExecuteActivity(ctx, in) // worker A, then it dies
				return nil, lostReply("worker A died (heartbeat timeout)")
			}
			return b.Dispatch(ctx, in.Args[0].(durable.DispatchInput)) // worker B
		}}
		id := "run-restart-" + t.Name()
		id = strings.ReplaceAll(id, "/", "-")
		e := env(t, w.runner(), fastRetries(), id, f)
		approveWhenAsked(t, e, yes)
		e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: id, Principal: user1, Input: "Refund ORDER-7."})
		got := checkOnce(t, w, result(t, e))
		if f.count() != 2 || got.Delivery == guard.DeliveryFresh {
			t.Errorf("%d attempts, delivery %s: want 2, the stored result", f.count(), got.Delivery)
		}
	})
}

// TestDeniedWriteNeverRuns: a human's no, by signal, is the model's answer.
func TestDeniedWriteNeverRuns(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	e := env(t, w.runner(), tgtemporal.Options{}, "run-no")
	approveWhenAsked(t, e, host.Decision{Approver: "bob", Reason: "wait for the return"})
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-no", Principal: user1, Input: "Refund ORDER-7."})
	res := result(t, e)
	if res.Status != durable.StatusCompleted || res.Calls[1].Code != "APPROVAL_REQUIRED" || w.svc.SideEffects() != 0 {
		t.Fatalf("result %+v, side effects %d", res, w.svc.SideEffects())
	}
	if got := outputs(t, w.srv)["c2"]; !strings.Contains(got.Message, "wait for the return") {
		t.Errorf("the model got %+v", got)
	}
}

// TestApprovalExpires: nobody answers; after ApprovalTimeout the model is
// told, and nothing runs.
func TestApprovalExpires(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	e := env(t, w.runner(), tgtemporal.Options{ApprovalTimeout: 3600_000_000_000}, "run-late")
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-late", Principal: user1, Input: "Refund ORDER-7."})
	res := result(t, e)
	if res.Calls[1].Code != "APPROVAL_REQUIRED" || w.svc.SideEffects() != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := outputs(t, w.srv)["c2"]; !strings.Contains(got.Message, tgtemporal.ExpiredReason) {
		t.Errorf("the model got %+v", got)
	}
}

// TestOtherTenantGetsNotFound: a run under tenant-b asks, with the status
// tool, about tenant-a's operation: NOT_FOUND; tenant-a's run gets it.
func TestOtherTenantGetsNotFound(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		store := redisStore(t, rdb)
		w := newWorld(t, store, refundScript()...)
		id := strings.ReplaceAll("run-a-"+t.Name(), "/", "-")
		e := env(t, w.runner(), tgtemporal.Options{}, id)
		asked := approveWhenAsked(t, e, yes)
		e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: id, Principal: user1, Input: "Refund ORDER-7."})
		checkOnce(t, w, result(t, e))
		op := (*asked)[0].OperationID
		for _, tc := range []struct {
			p    guard.Principal
			want string
		}{{tenantB, "NOT_FOUND"}, {user1, "OK"}} {
			w2 := newWorld(t, store, openaitest.Turn{Calls: []openaitest.Call{{CallID: "s1", Name: toolset.StatusToolName,
				Arguments: `{"operation_id":"` + op + `","tool":null}`}}}, openaitest.Turn{Text: "ok"})
			w2.svc = w.svc
			rid := id + "-" + tc.p.TenantID
			e2 := env(t, w2.runner(), tgtemporal.Options{}, rid)
			e2.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: rid, Principal: tc.p, Input: "What happened to " + op + "?"})
			res := result(t, e2)
			if len(res.Calls) != 1 || res.Calls[0].Code != tc.want {
				t.Errorf("%s: calls %+v, want %s", tc.p.TenantID, res.Calls, tc.want)
			}
			if got := outputs(t, w2.srv)["s1"]; got.Code.String() != tc.want {
				t.Errorf("%s: the model got %+v", tc.p.TenantID, got)
			}
		}
		if w.svc.SideEffects() != 1 {
			t.Errorf("side effects %d", w.svc.SideEffects())
		}
	})
}

// TestRunIDMustBeWorkflowID: a run started under another workflow id runs
// nothing.
func TestRunIDMustBeWorkflowID(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	e := env(t, w.runner(), tgtemporal.Options{}, "wf-1")
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "other", Principal: user1, Input: "Refund ORDER-7."})
	if err := e.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "workflow's id") {
		t.Fatalf("err %v, want the run id error", err)
	}
	if len(w.srv.Requests()) != 0 {
		t.Errorf("the model was asked %d times", len(w.srv.Requests()))
	}
}
