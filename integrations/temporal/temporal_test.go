package tgtemporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

func refundScript() []fakemodel.Turn {
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{{CallID: "c1", Name: readTool, Arguments: readArgs}}},
		{Calls: []fakemodel.Call{{CallID: "c2", Name: refundTool, Arguments: refundDup}}},
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
// retry is the same step (the same activity id): it owns the reservation
// attempt 1 made, and settles it from the tool's receipt, the draft
// attempt 1 made, instead of waiting; attempt 1's late commit changes
// nothing.
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
			if err != nil {
				t.Errorf("attempt 2 while attempt 1 hangs: %v, want the draft from the receipt", err)
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
	checkOnce(t, w, result(t, e))
	if f.count() != 2 {
		t.Errorf("%d attempts, want 2", f.count())
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
// told that nobody decided in time (not that a human declined), and
// nothing runs.
func TestApprovalExpires(t *testing.T) {
	w := newWorld(t, nil, refundScript()...)
	e := env(t, w.runner(), tgtemporal.Options{ApprovalTimeout: 3600_000_000_000}, "run-late")
	e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-late", Principal: user1, Input: "Refund ORDER-7."})
	res := result(t, e)
	if res.Calls[1].Code != "APPROVAL_REQUIRED" || w.svc.SideEffects() != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := outputs(t, w.srv)["c2"]; got.Code != guard.CodeApprovalRequired || got.Message != guard.ExpiredMessage {
		t.Errorf("the model got %+v, want the expired message", got)
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
			w2 := newWorld(t, store, fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "s1", Name: toolset.StatusToolName,
				Arguments: `{"operation_id":"` + op + `","tool":null}`}}}, fakemodel.Turn{Text: "ok"})
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

// TestNotifyOncePerQuestion: the approvers are told of a question once,
// in NotifyName, with the question's id as the key; a notifier that
// keeps failing is retried, then left, and the run goes on (the question
// stays readable and is answered).
func TestNotifyOncePerQuestion(t *testing.T) {
	for _, failing := range []bool{false, true} {
		w := newWorld(t, nil, refundScript()...)
		var keys []string
		opts := tgtemporal.Options{Notify: func(_ context.Context, key string, req host.ApprovalRequest) error {
			keys = append(keys, key)
			if failing {
				return errors.New("the chat is down")
			}
			return nil
		}}
		e := env(t, w.runner(), opts, "run-notify")
		asked := approveWhenAsked(t, e, yes)
		e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: "run-notify", Principal: user1, Input: "Refund ORDER-7."})
		checkOnce(t, w, result(t, e))
		want := 1
		if failing {
			want = int(tgtemporal.DefaultNotifyOptions().RetryPolicy.MaximumAttempts)
		}
		if len(*asked) != 1 || len(keys) != want {
			t.Fatalf("failing %v: %d questions, %d notifications; want 1 and %d", failing, len(*asked), len(keys), want)
		}
		for _, k := range keys {
			if k != durable.QuestionID((*asked)[0]) {
				t.Errorf("notified with key %q, want the question's id %q", k, durable.QuestionID((*asked)[0]))
			}
		}
	}
}

// TestOtherStepWaits: while one step's write runs (held after its side
// effect), another step of the same intent in the run (another activity)
// is not given it blind: its attempt fails retryably with
// ErrTypeInProgress, so that a later attempt is given the outcome.
func TestOtherStepWaits(t *testing.T) {
	w := newWorld(t, nil)
	hang := make(chan struct{})
	defer close(hang)
	w.tools = hangingTools(hang)
	r := w.runner()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger)
	a, b := s.NewTestActivityEnvironment(), s.NewTestActivityEnvironment()
	tgtemporal.RegisterActivities(a, &tgtemporal.Activities{Runner: r})
	tgtemporal.RegisterActivities(b, &tgtemporal.Activities{Runner: r})
	in := durable.DispatchInput{RunID: "run-two", Principal: user1, ResponseID: "resp_1",
		Call: durable.Call{ID: "c1", Name: refundTool, Arguments: refundDup}}
	v, err := a.ExecuteActivity(tgtemporal.DispatchName, in)
	var ask durable.DispatchOutput
	if err != nil || v.Get(&ask) != nil || ask.Ask == nil {
		t.Fatalf("question: %v, %+v", err, ask)
	}
	pending := host.PendingOf(*ask.Ask)
	in.Decision, in.Pending = &yes, &pending
	go func() { _, _ = a.ExecuteActivity(tgtemporal.DispatchName, in) }() // step 2 of a
	for w.svc.SideEffects() == 0 {
		time.Sleep(time.Millisecond)
	}
	// b's step 1 is another step than a's step 2.
	in.Call.ID = "c2"
	_, err = b.ExecuteActivity(tgtemporal.DispatchName, in)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != tgtemporal.ErrTypeInProgress || ae.NonRetryable() {
		t.Fatalf("another step while the write runs: %v, want the retryable %s", err, tgtemporal.ErrTypeInProgress)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects %d, want 1", n)
	}
}
