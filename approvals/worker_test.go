package approvals_test

import (
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
)

// outcome collects what a worker reports.
type outcome struct {
	results []*agentloop.RunResult
	errs    []error
}

func (w *world) worker(o *outcome) *approvals.Worker {
	return &approvals.Worker{Queue: w.store, Loop: w.loop, Lease: time.Minute,
		Done: func(_ string, res *agentloop.RunResult, err error) {
			o.results = append(o.results, res)
			o.errs = append(o.errs, err)
		}}
}

// An approved run resumes by itself and drafts once; a worker that finds
// nothing ready does nothing.
func TestWorkerResumesApproved(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		w := newWorld(t, rdb, refundTurns()...)
		ctx := ctxT(t)
		_, reqs := w.park(ctx)
		var o outcome
		wk := w.worker(&o)
		if n, err := wk.Once(ctx); n != 0 || err != nil {
			t.Fatalf("undecided run resumed: %d %v", n, err)
		}
		if _, err := w.store.Decide(ctx, leadA, reqs[0].ID, host.Decision{Approved: true}, false); err != nil {
			t.Fatal(err)
		}
		if n, err := wk.Once(ctx); n != 1 || err != nil || o.errs[0] != nil {
			t.Fatalf("resumed %d: %v %v", n, err, o.errs)
		}
		res := o.results[0]
		if res.Status != agentloop.StatusCompleted || res.Output != "drafted" || w.svc.SideEffects() != 1 {
			t.Fatalf("status %s output %q drafts %d\n%s", res.Status, res.Output, w.svc.SideEffects(), res.Transcript)
		}
		if n, _ := wk.Once(ctx); n != 0 || w.svc.SideEffects() != 1 {
			t.Fatalf("resumed again: %d", n)
		}
	})
}

// A denial reaches the model once; the model's second ask for the same
// intent is denied by the resumed run itself (it remembers the denial), a
// person is not asked again, and the run ends with no draft.
func TestWorkerDenialIsNotAskedAgain(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		w := newWorld(t, rdb, refundTurns()...)
		ctx := ctxT(t)
		_, reqs := w.park(ctx)
		if _, err := w.store.Decide(ctx, leadA, reqs[0].ID, host.Decision{Reason: "not a duplicate"}, false); err != nil {
			t.Fatal(err)
		}
		var o outcome
		n, err := w.worker(&o).Once(ctx)
		if n != 1 || err != nil {
			t.Fatalf("resumed %d: %v %v", n, err, o.errs)
		}
		if o.results[0].Status != agentloop.StatusCompleted || o.results[0].Output != "not drafted" || w.svc.SideEffects() != 0 {
			t.Fatalf("result %v %q, drafts %d", o.results[0].Status, o.results[0].Output, w.svc.SideEffects())
		}
		if list, _ := w.store.Pending(ctx, "tenant-a", 0); len(list) != 0 {
			t.Fatalf("a person is asked again: %+v", list[0])
		}
		recs, _ := w.store.Audit(ctx, "tenant-a")
		var events []string
		for _, r := range recs {
			events = append(events, r.Event)
		}
		if got := strings.Join(events, ","); got != "requested,denied" {
			t.Fatalf("audit events %s", got)
		}
		denials := 0
		for _, req := range w.srv.Requests() {
			for _, out := range req.Results() {
				if guardCode(out.Output) == guard.CodeApprovalRequired && strings.Contains(out.Output, "declined") {
					denials++
				}
			}
		}
		if denials != 2 {
			t.Fatalf("the model was told of %d denials, want 2 (the person's, then the repeat's)", denials)
		}
	})
}

// A request nobody decides expires; the worker resumes the run with a
// denial.
func TestWorkerExpires(t *testing.T) {
	_, rdb := redistest.Mini(t)
	w := newWorld(t, rdb, refundTurns()...)
	ctx := ctxT(t)
	w.park(ctx)
	w.now = w.now.Add(61 * time.Minute)
	var o outcome
	if n, err := w.worker(&o).Once(ctx); n < 1 || err != nil {
		t.Fatalf("resumed %d: %v", n, err)
	}
	// Nobody said no, so the model's second ask goes to a person again.
	if w.svc.SideEffects() != 0 || o.results[0].Status != agentloop.StatusPaused {
		t.Fatalf("drafts %d, status %s", w.svc.SideEffects(), o.results[0].Status)
	}
	recs, _ := w.store.Audit(ctx, "tenant-a")
	if len(recs) != 3 || recs[1].Event != "expired" || recs[2].Event != "requested" {
		t.Fatalf("audit %+v", recs)
	}
	wantExpiredTold(t, w)
}

// wantExpiredTold checks that the model was told of the expiry in its own
// words (guard.ExpiredMessage), not as a person's no.
func wantExpiredTold(t *testing.T, w *world) {
	t.Helper()
	for _, req := range w.srv.Requests() {
		for _, out := range req.Results() {
			if strings.Contains(out.Output, "A human declined") {
				t.Errorf("an expiry told as a no: %s", out.Output)
			}
			if guardCode(out.Output) == guard.CodeApprovalRequired && strings.Contains(out.Output, guard.ExpiredMessage) {
				return
			}
		}
	}
	t.Errorf("the model was never told %q", guard.ExpiredMessage)
}

// A Waiter (the run blocked on the inbox) whose request nobody decides
// before its wait: the model is told it expired, and nothing runs.
func TestWaiterExpires(t *testing.T) {
	_, rdb := redistest.Mini(t)
	w := newWorld(t, rdb, refundTurns()...)
	q, err := approvals.NewQueue(rdb, approvals.Options{Prefix: w.prefix + "waiter:", Tools: orders.Tools(w.svc), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := guard.NewSigner(w.key)
	client := oai.NewClient(option.WithBaseURL(w.srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), orders.Tools(w.svc), agentloop.Options{
		Store: w.guardStore(rdb), Signer: signer, Approver: &approvals.Waiter{Queue: q, Wait: 50 * time.Millisecond, Poll: 10 * time.Millisecond}})
	res, err := loop.Run(ctxT(t), user1, "refund ORDER-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "not drafted" || w.svc.SideEffects() != 0 {
		t.Fatalf("result %v %q, drafts %d", res.Status, res.Output, w.svc.SideEffects())
	}
	wantExpiredTold(t, w)
}

// A worker that dies mid-resume (here: the provider fails after the grant
// was used) leaves its claim; after the lease another process, with its
// own store and loop on the same Redis and signer key, resumes the run,
// and the draft is still created once.
func TestWorkerAfterRestart(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		draft := fakemodel.Call{Name: "create_refund_draft", Arguments: refundArgs}
		w := newWorld(t, rdb, fakemodel.Turn{Calls: []fakemodel.Call{draft}}, fakemodel.Turn{Status: 500})
		ctx := ctxT(t)
		_, reqs := w.park(ctx)
		if _, err := w.store.Decide(ctx, leadA, reqs[0].ID, host.Decision{Approved: true}, false); err != nil {
			t.Fatal(err)
		}
		var o outcome
		if n, _ := w.worker(&o).Once(ctx); n != 1 || o.errs[0] == nil {
			t.Fatalf("first worker: %d %v", n, o.errs)
		}
		if w.svc.SideEffects() != 1 {
			t.Fatalf("drafts %d", w.svc.SideEffects())
		}

		// The other process: its own client, loop and store, on the same
		// provider, Redis, signer key and secret key.
		w.srv.Enqueue(fakemodel.Turn{Text: "drafted"})
		srv := w.srv
		signer, _ := guard.NewSigner(w.key)
		client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
		loop2 := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), orders.Tools(w.svc), agentloop.Options{Store: w.guardStore(rdb), Signer: signer})
		store2, err := approvals.NewQueue(rdb, approvals.Options{Prefix: w.prefix, SecretKey: w.key, Clock: guard.ClockFunc(func() time.Time { return w.now })})
		if err != nil {
			t.Fatal(err)
		}
		var o2 outcome
		wk2 := &approvals.Worker{Queue: store2, Loop: loop2, Done: func(_ string, res *agentloop.RunResult, err error) {
			o2.results, o2.errs = append(o2.results, res), append(o2.errs, err)
		}}
		if n, _ := wk2.Once(ctx); n != 0 {
			t.Fatal("claimed while the first worker's lease holds")
		}
		w.now = w.now.Add(2 * time.Minute)
		if n, err := wk2.Once(ctx); n != 1 || err != nil || o2.errs[0] != nil {
			t.Fatalf("second worker: %d %v %v", n, err, o2.errs)
		}
		if o2.results[0].Status != agentloop.StatusCompleted || w.svc.SideEffects() != 1 {
			t.Fatalf("status %s, drafts %d\n%s", o2.results[0].Status, w.svc.SideEffects(), o2.results[0].Transcript)
		}
	})
}

// A denial carries two texts: the message for the model, and an internal
// note for the audit log. The note reaches no request the model sees; the
// message does, and both are audited.
func TestInternalNoteNeverReachesTheModel(t *testing.T) {
	const note, message = "customer already refunded by phone", "refunded another way"
	_, rdb := redistest.Mini(t)
	w := newWorld(t, rdb, refundTurns()...)
	ctx := ctxT(t)
	_, reqs := w.park(ctx)
	if _, err := w.store.Decide(ctx, leadA, reqs[0].ID, host.Decision{Reason: message, Note: note}, false); err != nil {
		t.Fatal(err)
	}
	var o outcome
	if n, err := w.worker(&o).Once(ctx); n != 1 || err != nil || o.errs[0] != nil {
		t.Fatalf("resumed %d: %v %v", n, err, o.errs)
	}
	sawMessage := false
	for _, r := range w.srv.Requests() {
		if strings.Contains(string(r.Body), note) {
			t.Errorf("a model request carries the internal note: %s", r.Body)
		}
		sawMessage = sawMessage || strings.Contains(string(r.Body), message)
	}
	if !sawMessage {
		t.Error("no model request carries the approver's message")
	}
	if strings.Contains(o.results[0].Transcript.String(), note) {
		t.Errorf("the transcript carries the note:\n%s", o.results[0].Transcript)
	}
	got, err := w.store.Get(ctx, leadA.TenantID, reqs[0].ID)
	if err != nil || got.Note != note || got.Reason != message {
		t.Fatalf("stored %+v %v", got, err)
	}
	recs, err := w.store.Audit(ctx, leadA.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Event != "denied" || last.Note != note || last.Reason != message {
		t.Errorf("audited %+v", last)
	}
}
