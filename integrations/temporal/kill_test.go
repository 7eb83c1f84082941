package tgtemporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// EnvKillRuns sets how many runs TestWorkerKilledMidActivity kills
// (default 60; the figures in docs/temporal.md are from 200), and
// EnvKillSeed its seed (default a new one, logged).
const (
	EnvKillRuns = "TGTEMPORAL_KILL_RUNS"
	EnvKillSeed = "TGTEMPORAL_KILL_SEED"
)

// The kill points inside an activity: at a write's start (reserved,
// nothing run), after its side effect (before the guard stored the
// outcome), after a notification was sent, and after the activity's work
// (before its completion reached the server).
const (
	atEnter    = "enter"
	atAfter    = "after"
	atNotified = "notified"
	atDone     = "done"
)

// activitiesPerRun is how many activities a run of RefundScript runs, in
// this order: turn, read, turn, the question's dispatch, notification,
// the decision's dispatch (the refund), turn, the note's dispatch, turn.
const activitiesPerRun = 9

// killKey is the context key of an attempt's kill point.
type killKey struct{}

// die ends the goroutine of an attempt whose kill point is at: its worker
// is gone, nothing after this runs, nothing is reported.
func die(ctx context.Context, at string) {
	if p, _ := ctx.Value(killKey{}).(string); p == at {
		runtime.Goexit()
	}
}

// ledger is the downstream system of the kill test: every execution of a
// write counted per run and tool (never deduplicated, so that a second
// execution shows), a receipt per downstream key, and the notifications
// the approvers got, deduplicated by key as a careful notifier does.
type ledger struct {
	mu          sync.Mutex
	writes      map[string]int    // run + tool
	receipts    map[string]string // downstream key -> result
	notices     map[string]string // question key -> run
	notifyCalls int
}

func newLedger() *ledger {
	return &ledger{writes: map[string]int{}, receipts: map[string]string{}, notices: map[string]string{}}
}

type killOrderIn struct {
	OrderRef string `json:"order_ref"`
}

type killRefundIn struct {
	OrderRef string `json:"order_ref"`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged"`
}

type killNoteIn struct {
	OrderRef string `json:"order_ref"`
	Text     string `json:"text"`
}

type killOut struct {
	DraftID string `json:"draft_id,omitempty"`
	NoteID  string `json:"note_id,omitempty"`
}

// write is a write's side effect, with the attempt's kill points around it.
func (l *ledger) write(ctx context.Context, inv *guard.Invocation, out killOut) (killOut, error) {
	die(ctx, atEnter)
	b, _ := json.Marshal(out)
	l.mu.Lock()
	l.writes[inv.Context.Scope+" "+inv.Proposal.Name]++
	if _, ok := l.receipts[inv.IdempotencyKey]; !ok {
		l.receipts[inv.IdempotencyKey] = string(b)
	}
	l.mu.Unlock()
	die(ctx, atAfter)
	return out, nil
}

func (l *ledger) receipt(_ context.Context, inv *guard.Invocation) (killOut, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.receipts[inv.IdempotencyKey]
	if !ok {
		return killOut{}, false, nil
	}
	var out killOut
	return out, true, json.Unmarshal([]byte(s), &out)
}

func (l *ledger) notify(ctx context.Context, key string, req host.ApprovalRequest) error {
	l.mu.Lock()
	l.notifyCalls++
	l.notices[key] = req.RunID
	l.mu.Unlock()
	die(ctx, atNotified)
	return nil
}

func (l *ledger) tools() *toolset.Set {
	get := toolset.Read(readTool, "Look up an order.", func(context.Context, *guard.Invocation, killOrderIn) (killOut, error) {
		return killOut{}, nil
	}, nil)
	refund := toolset.Write(refundTool, "Draft a refund.", func(ctx context.Context, inv *guard.Invocation, in killRefundIn) (killOut, error) {
		return l.write(ctx, inv, killOut{DraftID: "DRAFT-" + in.OrderRef})
	}, &toolset.Options[killRefundIn, killOut]{NeedsApproval: true, Receipt: l.receipt})
	note := toolset.Write(noteTool, "Add a note to an order.", func(ctx context.Context, inv *guard.Invocation, in killNoteIn) (killOut, error) {
		return l.write(ctx, inv, killOut{NoteID: "NOTE-" + in.OrderRef})
	}, &toolset.Options[killNoteIn, killOut]{Receipt: l.receipt})
	return toolset.MustNew(get, refund, note)
}

const noteTool = frameworktest.NoteTool

// killer is the worker interceptor of the kill test: the attempt 1 of one
// chosen activity of a run runs on worker A and dies at the chosen point
// (its goroutine ends there: nothing after it runs or is reported), and
// the server, which never hears from A again, retries the activity on
// worker B, a process of its own over the same Redis and downstream. Every
// other attempt runs on B too once A is dead.
type killer struct {
	interceptor.WorkerInterceptorBase
	b      *tgtemporal.Activities
	target int                                      // the index of the activity (attempt 1s, in order) A dies in
	pick   func(activityType string, in any) string // where in it
	mu     sync.Mutex
	seen   int
	died   bool
	hit    string // where A died
}

// pointIn picks, with rng, where in an activity its worker dies: in a
// write's dispatch at its start, after its side effect or at its end; in
// a notification after the send or at its end; elsewhere at its end.
func pointIn(rng *rand.Rand) func(activityType string, in any) string {
	return func(activityType string, in any) string {
		switch d, _ := in.(durable.DispatchInput); {
		case activityType == tgtemporal.DispatchName && (d.Decision != nil || d.Call.Name == noteTool):
			return []string{atEnter, atAfter, atDone}[rng.IntN(3)]
		case activityType == tgtemporal.NotifyName:
			return []string{atNotified, atDone}[rng.IntN(2)]
		}
		return atDone
	}
}

func (k *killer) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &killerActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, k: k}
}

type killerActivity struct {
	interceptor.ActivityInboundInterceptorBase
	k *killer
}

func (a *killerActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	k := a.k
	info := activity.GetInfo(ctx)
	k.mu.Lock()
	onB := k.died
	n := -1
	if info.Attempt == 1 {
		n = k.seen
		k.seen++
	}
	k.mu.Unlock()
	if onB {
		return k.onB(ctx, info.ActivityType.Name, in)
	}
	if n != k.target {
		return a.Next.ExecuteActivity(ctx, in)
	}
	// Worker A runs the attempt, and dies in it.
	point := k.pick(info.ActivityType.Name, in.Args[0])
	done := make(chan struct{})
	ended := false
	go func() {
		defer close(done)
		_, _ = a.Next.ExecuteActivity(context.WithValue(ctx, killKey{}, point), in)
		ended = true
	}()
	<-done
	k.mu.Lock()
	k.died = true
	k.hit = info.ActivityType.Name + " " + point
	if ended != (point == atDone) {
		k.hit += " (missed)"
	}
	k.mu.Unlock()
	return nil, lostReply("worker A died (its heartbeat, then its start-to-close timeout, ran out)")
}

// onB runs an attempt on worker B.
func (k *killer) onB(ctx context.Context, activityType string, in *interceptor.ExecuteActivityInput) (any, error) {
	switch activityType {
	case tgtemporal.TurnName:
		return k.b.Turn(ctx, in.Args[0].(durable.TurnInput))
	case tgtemporal.DispatchName:
		return k.b.Dispatch(ctx, in.Args[0].(durable.DispatchInput))
	case tgtemporal.NotifyName:
		return nil, k.b.NotifyApprovers(ctx, in.Args[0].(host.ApprovalRequest))
	}
	return nil, fmt.Errorf("no activity %q on worker B", activityType)
}

// TestWorkerKilledMidActivity runs runs of a read, an approved write and a
// second write, each with its worker killed once inside a random activity
// (a turn, a dispatch, the notification) at a random point: at a write's
// start, after its side effect before the guard stored the outcome, after
// the notification was sent, or after the activity's work before its
// completion reached the server. Temporal retries the activity on another
// worker. For every run: each write executed exactly once, the approvers
// notified once (by a notifier that deduplicates by the question's key),
// the human asked once, the audit chain verified with one executed record
// per write, the answer the uninterrupted run's, and the run's end within
// ApprovalTimeout + 10 s of its decision (workflow time).
func TestWorkerKilledMidActivity(t *testing.T) {
	runs, rng := frameworktest.KillPlan(t, EnvKillRuns, EnvKillSeed, 60)
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		store := redisStore(t, rdb)
		l := newLedger()
		turns := make([]fakemodel.Turn, 10*runs*activitiesPerRun)
		for i := range turns {
			turns[i] = fakemodel.Turn{Respond: frameworktest.RefundScript}
		}
		w := newWorld(t, store, turns...)
		w.tools, w.stateless = func(*orders.Service) *toolset.Set { return l.tools() }, true
		var (
			problems []string
			hits     = map[string]int{}
			asked    int
			latest   time.Duration
		)
		for i := range runs {
			id := fmt.Sprintf("kill-%d", i)
			// Half the runs die in one of the two writes (activities 5 and
			// 7: the decision's dispatch and the note's), the others in
			// any activity.
			target := rng.IntN(activitiesPerRun)
			if rng.IntN(2) == 0 {
				target = []int{5, 7}[rng.IntN(2)]
			}
			k := &killer{b: &tgtemporal.Activities{Runner: w.runner(), Notify: l.notify}, target: target, pick: pointIn(rng)}
			opts := fastRetries()
			opts.Notify = l.notify
			e := env(t, w.runner(), opts, id, k)
			var decided time.Time
			human := approveWhenAskedAt(t, e, yes, &decided)
			e.ExecuteWorkflow(tgtemporal.WorkflowName, durable.Run{ID: id, Principal: user1, Input: "refund ORDER-7 #" + id})
			bad := func(format string, args ...any) { problems = append(problems, id+": "+fmt.Sprintf(format, args...)) }
			if !e.IsWorkflowCompleted() || e.GetWorkflowError() != nil {
				bad("did not complete: %v", e.GetWorkflowError())
				continue
			}
			var res durable.Result
			if err := e.GetWorkflowResult(&res); err != nil {
				bad("%v", err)
				continue
			}
			if !k.died {
				bad("worker A never died (activity %d of %d)", k.target, k.seen)
			}
			hits[k.hit]++
			if strings.HasSuffix(k.hit, "(missed)") {
				bad("worker A did not die where it was to: %s", k.hit)
			}
			if res.Status != durable.StatusCompleted || res.Output != frameworktest.RefundAnswer {
				bad("ended %s %q, want %q", res.Status, res.Output, frameworktest.RefundAnswer)
			}
			if len(*human) != 1 {
				bad("the human was asked %d times, want once", len(*human))
			}
			asked += len(*human)
			if took := e.Now().Sub(decided); decided.IsZero() || took > tgtemporal.DefaultApprovalTimeout+10*time.Second {
				bad("stranded: it ended %v after its decision", took)
			} else {
				latest = max(latest, took)
			}
			l.mu.Lock()
			for _, tool := range []string{refundTool, noteTool} {
				if n := l.writes[id+" "+tool]; n != 1 {
					bad("%s ran %d times, want once", tool, n)
				}
			}
			notices := 0
			for _, run := range l.notices {
				if run == id {
					notices++
				}
			}
			l.mu.Unlock()
			if notices != 1 {
				bad("the approvers were notified of %d questions, want 1", notices)
			}
		}
		problems = append(problems, checkAudit(t, store, runs)...)
		var where []string
		for h, n := range hits {
			where = append(where, fmt.Sprintf("%s: %d", h, n))
		}
		slices.Sort(where)
		t.Logf("%d runs, worker killed once in each (%s); %d notifier calls for %d questions (%d repeated with the same key); "+
			"the human asked %d times; longest decision-to-end %v (workflow time); %d problems", runs, strings.Join(where, ", "),
			l.notifyCalls, len(l.notices), l.notifyCalls-len(l.notices), asked, latest, len(problems))
		if len(problems) > 0 {
			t.Fatal(strings.Join(problems, "\n"))
		}
	})
}

// checkAudit verifies the tenant's audit chain, and that each of the runs'
// write operations has one executed record.
func checkAudit(t *testing.T, store guard.Store, runs int) []string {
	t.Helper()
	ctx := context.Background()
	st := store.(*idem.Store)
	n, err := guard.VerifyAudit(ctx, st, user1.TenantID)
	if err != nil {
		return []string{"the audit chain does not verify: " + err.Error()}
	}
	recs, _, err := st.Audit(ctx, user1.TenantID, 0, int(n)+1)
	if err != nil {
		return []string{err.Error()}
	}
	executed := map[string]int{}
	for _, r := range recs {
		var b guard.AuditBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return []string{err.Error()}
		}
		if r.SideEffect == guard.SideEffectYes {
			executed[b.Context.OperationID]++
		}
	}
	var problems []string
	ops := 0
	for op, c := range executed {
		ops++
		if c != 1 {
			problems = append(problems, fmt.Sprintf("audit: %d executed records of operation %s, want 1", c, op))
		}
	}
	if ops != 2*runs {
		problems = append(problems, fmt.Sprintf("audit: %d executed operations, want %d (two writes a run)", ops, 2*runs))
	}
	return problems
}
