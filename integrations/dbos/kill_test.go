package tgdbos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/pgstore"
)

// waitApproval is the kill point the parent itself picks: the run
// published its question, told the approvers, and waits in DBOS Recv.
const waitApproval = "approval-wait"

// killPoints are the points of the three-tool run (a read, an approved
// write, a second write) where TestKillAtEveryStep kills the process: after
// each model turn's reply came back, inside each write before its side
// effect (reserved, nothing run) and after it (before the guard stored the
// outcome), after each dispatch the guard answered (DBOS had not recorded
// the step), inside Notify after the notification, and while the run
// waits for its human.
var killPoints = []string{
	"",      // no kill: the reference run
	"turn1", // the model asked for get_order
	"dispatched:" + readTool + ":OK",
	"turn2", // the model asked for the refund
	"dispatched:" + refundTool + ":APPROVAL_REQUIRED", // the question, before it was recorded
	"notify", // the approvers were told; DBOS had not recorded it
	waitApproval,
	"enter:" + refundTool, // the approved write reserved, not run
	"tool:" + refundTool,  // the approved write ran, its outcome not stored
	"dispatched:" + refundTool + ":OK",
	"turn3", // the model asked for the note
	"enter:" + noteTool,
	"tool:" + noteTool,
	"dispatched:" + noteTool + ":OK",
	"turn4", // the final answer
}

// wantOutput is the final answer of every run of "refund ORDER-7".
const wantOutput = frameworktest.RefundAnswer

// TestKillAtEveryStep runs the three-tool run in a child process, SIGKILLs
// it at each kill point, and lets a new process recover the workflow
// (DBOS recovery at launch) and finish it. Whatever the point: each write
// ran exactly once (rows of the test's Postgres table), the approvers were
// notified once (the deduplicating notifier's rows), the human was asked
// once and answered once, the tenant's audit chain verifies with one
// executed record per write operation, and the run ends with the
// reference run's answer.
func TestKillAtEveryStep(t *testing.T) {
	killAtEveryStep(t, killPoints, false)
}

// TestOnePostgresKillAtEveryStep is TestKillAtEveryStep on one Postgres:
// the guard's records in the DBOS database (pgstore), and the note a
// transactional write whose dispatch is a DBOS transaction
// (Options.DataSource), so that its row, its outcome, its audit record
// and DBOS's record of the step commit together. Killed inside the note's
// transaction (before its insert, after it, after the guard answered),
// nothing of it stays, and the recovered run writes it once: its one
// executed audit record is the recovered run's.
func TestOnePostgresKillAtEveryStep(t *testing.T) {
	killAtEveryStep(t, []string{"", "tool:" + refundTool, "dispatched:" + refundTool + ":OK", "turn3",
		"enter:" + noteTool, "tool:" + noteTool, "dispatched:" + noteTool + ":OK", "turn4"}, true)
}

// killAtEveryStep kills the three-tool run at each of points ("" the
// reference run, first), on one Postgres or with Redis beside.
func killAtEveryStep(t *testing.T, points []string, onePostgres bool) {
	srv := modelServer(t, 400)
	redisURL, prefix := redisFor(t)
	var ref *durable.Result
	for i, point := range points {
		name := point
		if name == "" {
			name = "none"
		}
		ok := t.Run(strings.NewReplacer(":", "_").Replace(name), func(t *testing.T) {
			run := durable.Run{ID: "refund-run-" + itoa(i), Principal: acme, Input: "refund ORDER-7"}
			dbName := "kill" + itoa(i)
			if onePostgres {
				dbName = "onepg" + itoa(i)
			}
			e := env{Postgres: postgresURL(t, dbName), Redis: redisURL, Prefix: prefix + "k" + itoa(i) + ":",
				Model: srv.BaseURL(), Kill: point, Runs: []durable.Run{run}, OnePostgres: onePostgres}
			client, db := migratedClient(t, e.Postgres)
			first := startChild(t, roleStart, e)
			human := &approver{client: client, id: run.ID}
			if point != waitApproval {
				human.start(t)
			}
			var res durable.Result
			switch point {
			case "":
				res = first.result(t)
			case waitApproval:
				waitForRecv(t, client, run.ID)
				first.kill()
				human.start(t)
			default:
				if l := first.line(t); l != killLine+point {
					t.Fatalf("child: %q, want the kill point %q", l, point)
				}
				first.kill()
			}
			if point != "" {
				e.Kill = ""
				res = startChild(t, roleRecover, e).result(t)
			}
			human.endedAt = time.Now()
			human.stop()
			if point == "" {
				ref = &res
			}
			if ref == nil {
				t.Fatal("no reference run")
			}
			if problems := checkRuns(context.Background(), e, db, []durable.Result{res}, *ref, map[string]*approver{run.ID: human}); len(problems) > 0 {
				t.Fatal(strings.Join(problems, "\n"))
			}
		})
		if !ok && point == "" {
			t.Fatal("the uninterrupted run failed: no point in killing it")
		}
	}
}

// EnvKillRuns sets how many runs TestKillAtRandom kills in flight (default
// 10; the figures in docs/dbos.md are from TGDBOS_KILL_RUNS=200), and
// EnvKillSeed its random seed (default: a new one, logged).
const (
	EnvKillRuns = "TGDBOS_KILL_RUNS"
	EnvKillSeed = "TGDBOS_KILL_SEED"
)

// killBatch is how many runs one child process runs at once.
const killBatch = 10

// TestKillAtRandom kills runs at random moments, batch after batch until
// EnvKillRuns runs were killed in flight (DBOS executed them more than
// once): a child process starts a batch of runs, staggered, and is
// SIGKILLed at a random moment while they run (within 1 s of a random
// run's start); a third of the time the process that recovers them is
// killed too, at another; a last one recovers every run
// and finishes it, while the human approves
// each run's question once from the test's process. For every run: each
// write executed exactly once (rows of the test's Postgres table), the
// approvers notified once per question (the deduplicating notifier's
// rows), the human asked once, the audit chain verified, the final answer
// the uninterrupted run's, and the run's end within ApprovalTimeout + 10 s
// of its decision. It logs the figures: runs, kills, repeated
// notifications (the same key), the longest decision-to-end time.
func TestKillAtRandom(t *testing.T) {
	want, rng := frameworktest.KillPlan(t, EnvKillRuns, EnvKillSeed, 10)
	srv := modelServer(t, 40*want+800)
	redisURL, prefix := redisFor(t)
	ctx := context.Background()
	var (
		st       killStats
		problems []string
		ref      = durable.Result{Status: durable.StatusCompleted, Output: wantOutput, Turns: 4, Calls: []durable.CallRecord{
			{Turn: 1, CallID: readCall, Tool: readTool, Code: "OK"},
			{Turn: 2, CallID: refundCall, Tool: refundTool, Code: "OK", Asked: true},
			{Turn: 3, CallID: noteCall, Tool: noteTool, Code: "OK"}}}
	)
	for b := 0; st.interrupted < want; b++ {
		if st.runs >= 4*want+2*killBatch {
			t.Fatalf("%d runs, only %d of them killed in flight: the kill moments miss the runs", st.runs, st.interrupted)
		}
		// A batch is a subtest, so that its clients and databases are
		// closed when it ends.
		if !t.Run(fmt.Sprintf("batch%d", b), func(t *testing.T) {
			n := killBatch
			e := env{Postgres: postgresURL(t, "random"+itoa(b)), Redis: redisURL, Prefix: prefix + "r" + itoa(b) + ":",
				Model: srv.BaseURL(), Stagger: 1500 * time.Millisecond}
			for i := range n {
				id := fmt.Sprintf("random-%d-%d", b, i)
				e.Runs = append(e.Runs, durable.Run{ID: id, Principal: acme, Input: "refund ORDER-7 #" + id})
			}
			client, db := migratedClient(t, e.Postgres)
			humans := map[string]*approver{}
			for _, r := range e.Runs {
				humans[r.ID] = &approver{client: client, id: r.ID}
				humans[r.ID].start(t)
			}
			// The first process, killed at a random moment; the one that
			// recovers, killed too a third of the time.
			for kill, role := range []string{roleStart, roleRecover} {
				if kill == 1 && rng.IntN(3) != 0 {
					break
				}
				c := startChild(t, role, e)
				if l := c.line1(t); l != startedLine {
					t.Fatalf("child: %q before it launched", l)
				}
				// A run takes about a second: killed within 1 s of a
				// random run's start, that run and the others started
				// before it are in flight.
				if c.killInFlight(t, 1+rng.IntN(n), time.Duration(rng.Int64N(int64(time.Second)))) {
					st.kills++
				} else {
					st.finishedFirst++
				}
			}
			var results []durable.Result
			for _, r := range startChild(t, roleRecover, e).results(t, n) {
				humans[r.RunID].endedAt = r.at
				results = append(results, r.Result)
			}
			for _, h := range humans {
				h.stop()
			}
			st.runs += len(results)
			k := interrupted(t, client, e.Runs)
			t.Logf("%d of %d runs killed in flight", k, len(results))
			st.interrupted += k
			p := checkRuns(ctx, e, db, results, ref, humans)
			problems = append(problems, p...)
			st.notifyCalls += count(ctx, db, "SELECT count(*) FROM tg_notify_calls")
			st.notices += count(ctx, db, "SELECT count(*) FROM tg_notices")
			for _, r := range results {
				if d := humans[r.RunID].decidedAt(); !d.IsZero() {
					st.maxLatency = max(st.maxLatency, humans[r.RunID].endedAt.Sub(d))
				}
			}
		}) {
			break
		}
	}
	t.Logf("%d runs, %d of them killed in flight and recovered; %d processes killed (%d ended before their kill moment); "+
		"%d notifier calls for %d questions (%d repeated with the same key); longest decision-to-end %v; %d problems",
		st.runs, st.interrupted, st.kills, st.finishedFirst, st.notifyCalls, st.notices,
		st.notifyCalls-st.notices, st.maxLatency.Round(time.Millisecond), len(problems))
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
}

// interrupted counts the runs whose workflow DBOS executed more than once:
// a process died while it ran them, and another recovered them.
func interrupted(t *testing.T, c dbos.Client, runs []durable.Run) int {
	t.Helper()
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	ws, err := dbos.ListWorkflows(c, dbos.WithFilterWorkflowIDs(ids...), dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range ws {
		if w.Attempts > 1 {
			n++
		}
	}
	return n
}

// killStats are TestKillAtRandom's figures.
type killStats struct {
	runs, interrupted, kills, finishedFirst int
	notifyCalls, notices                    int
	maxLatency                              time.Duration
}

// checkRuns checks what every run, killed or not, ends with, and returns
// what is wrong, a line a run: completed with the reference answer and
// calls; each write executed once (the shop's rows); the approvers
// notified once (one notice, whatever the notifier's calls); the human
// asked and answering once, the run ending within ApprovalTimeout + 10 s
// of the decision; the tenant's audit chain verified, with one executed
// record per write operation, named by the run's scope.
func checkRuns(ctx context.Context, e env, db *pgxpool.Pool, results []durable.Result, ref durable.Result, humans map[string]*approver) []string {
	var problems []string
	bad := func(run, format string, args ...any) {
		problems = append(problems, run+": "+fmt.Sprintf(format, args...))
	}
	sh := &shop{db: db}
	for _, res := range results {
		if res.Status != durable.StatusCompleted || res.Output != wantOutput {
			bad(res.RunID, "status %s, answer %q (%s); want %q", res.Status, res.Output, res.Reason, wantOutput)
		}
		if msg := sameAnswer(res, ref); msg != "" {
			bad(res.RunID, "%s", msg)
		}
		for _, tool := range []string{refundTool, noteTool} {
			if n := sh.executions(ctx, res.RunID, tool); n != 1 {
				bad(res.RunID, "%s ran %d times, want exactly once", tool, n)
			}
		}
		if n := count(ctx, db, "SELECT count(*) FROM tg_notices WHERE run_id = $1", res.RunID); n != 1 {
			bad(res.RunID, "the approvers were notified of %d questions, want 1", n)
		}
		h := humans[res.RunID]
		if n := h.answered(); n != 1 {
			bad(res.RunID, "the human answered %d questions, want one", n)
		}
		if d := h.decidedAt(); !d.IsZero() && h.endedAt.Sub(d) > time.Minute+10*time.Second {
			bad(res.RunID, "stranded: it ended %v after its decision, over ApprovalTimeout + 10 s", h.endedAt.Sub(d))
		}
	}
	var st guard.AuditStore
	if e.OnePostgres {
		s, err := pgstore.New(ctx, db, pgstore.Options{})
		if err != nil {
			return append(problems, err.Error())
		}
		st = s
	} else {
		opts, _ := redis.ParseURL(e.Redis)
		opts.ContextTimeoutEnabled = true
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		s, err := idem.New(rdb, idem.Options{Prefix: e.Prefix, AllowEviction: true})
		if err != nil {
			return append(problems, err.Error())
		}
		st = s
	}
	n, err := guard.VerifyAudit(ctx, st, acme.TenantID)
	if err != nil {
		return append(problems, "the audit chain does not verify: "+err.Error())
	}
	recs, _, err := st.Audit(ctx, acme.TenantID, 0, int(n)+1)
	if err != nil || int64(len(recs)) != n {
		return append(problems, fmt.Sprintf("audit: %d records, Verify read %d, %v", len(recs), n, err))
	}
	// One executed record per write operation of each run.
	executed, records := map[string]int{}, map[string]int{}
	ops := map[string]bool{}
	for _, r := range recs {
		var b guard.AuditBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return append(problems, err.Error())
		}
		if b.Tool != refundTool && b.Tool != noteTool {
			continue
		}
		ops[b.Tool+" "+b.Context.OperationID] = true
		records[b.Tool+" "+b.Context.OperationID]++
		if r.SideEffect == guard.SideEffectYes {
			executed[b.Tool+" "+b.Context.OperationID]++
		}
	}
	if e.OnePostgres {
		// The note's dispatch is a DBOS transaction: its audit record
		// commits with DBOS's record of the step (a transaction_completion
		// row), so a dispatch killed before that commit left no record,
		// and the step is never run again to replay it: one record.
		for _, res := range results {
			op, _ := guard.ScopeIDs(res.RunID, guard.Fingerprint(noteTool, []byte(argsOf(noteTool))))
			if n := records[noteTool+" "+op]; n != 1 {
				bad(res.RunID, "audit: %d records of the note's dispatch, want 1 (its DBOS transaction's)", n)
			}
			if n := count(ctx, db, "SELECT count(*) FROM dbos.transaction_completion WHERE workflow_id = $1", res.RunID); n != 1 {
				bad(res.RunID, "%d DBOS transactions recorded, want 1: the note's dispatch", n)
			}
		}
	}
	for _, res := range results {
		for _, tool := range []string{refundTool, noteTool} {
			fp := guard.Fingerprint(tool, []byte(argsOf(tool)))
			op, _ := guard.ScopeIDs(res.RunID, fp)
			if !ops[tool+" "+op] || executed[tool+" "+op] != 1 {
				bad(res.RunID, "audit: %d executed records of %s %s, want 1", executed[tool+" "+op], tool, op)
			}
		}
	}
	if len(ops) != 2*len(results) {
		problems = append(problems, fmt.Sprintf("audit: %d write operations, want %d (two a run)", len(ops), 2*len(results)))
	}
	return problems
}

// argsOf is the canonical arguments the script gives a write of ORDER-7.
func argsOf(tool string) string {
	if tool == refundTool {
		return `{"order_ref":"ORDER-7","reason":"duplicate"}`
	}
	return `{"order_ref":"ORDER-7","text":"refund drafted"}`
}

// sameAnswer says how a run did not end as the reference run did: the
// same answer, turns and calls (a replayed call's delivery is a replay,
// and each run has call ids of its own).
func sameAnswer(got, ref durable.Result) string {
	if got.Output != ref.Output || got.Status != ref.Status || got.Turns != ref.Turns || len(got.Calls) != len(ref.Calls) {
		return fmt.Sprintf("ended %+v, the uninterrupted run %+v", got, ref)
	}
	for i := range got.Calls {
		g, r := got.Calls[i], ref.Calls[i]
		g.Delivery, r.Delivery = "", ""
		g.CallID, r.CallID = "", "" // each run's own
		if g != r {
			return fmt.Sprintf("call %d: %+v, the uninterrupted run's %+v", i, got.Calls[i], ref.Calls[i])
		}
		if d := got.Calls[i].Delivery; !slices.Contains([]string{"fresh", "local_replay"}, d) {
			return fmt.Sprintf("call %d delivered %q", i, d)
		}
	}
	return ""
}

// migratedClient creates the DBOS system database at url (a context that
// migrates it, shut down at once) and the shop's tables in it, and
// returns a DBOS client on it (the human's process) and the shop's
// database.
func migratedClient(t *testing.T, url string) (dbos.Client, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: url, AppName: "tgdbos-test", ApplicationVersion: "test",
		ExecutorID: "migrate", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_ = dbos.Shutdown(dc, 5*time.Second)
	db, err := openShop(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	c, err := dbos.NewClient(context.Background(), dbos.ClientConfig{DatabaseURL: url, AppName: "tgdbos-test", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dbos.Shutdown(c, 5*time.Second) })
	return c, db
}

// waitForRecv waits until the run id waits in Recv for its decision: its
// notify step recorded, and the Recv's deadline (a DBOS.sleep step).
func waitForRecv(t *testing.T, c dbos.Client, id string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		steps, err := dbos.GetWorkflowSteps(c, id)
		if err == nil {
			var names []string
			for _, s := range steps {
				names = append(names, s.StepName)
			}
			if i := slices.Index(names, tgdbos.NotifyName); i >= 0 && slices.Contains(names[i:], "DBOS.sleep") {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the run never waited for its decision")
}

// approver is the human, in the test's process: it waits for the run's
// question and approves it, once, and then for the run's end.
type approver struct {
	client  dbos.Client
	id      string
	mu      sync.Mutex
	n       int
	decided time.Time
	endedAt time.Time // when the test saw the run's result
	quit    chan struct{}
	wg      sync.WaitGroup
}

func (a *approver) start(t *testing.T) {
	a.quit = make(chan struct{})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			select {
			case <-a.quit:
				return
			default:
			}
			if a.answered() > 0 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			req, err := tgdbos.Pending(a.client, a.id, 200*time.Millisecond)
			if err != nil || req == nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err := tgdbos.Approve(a.client, a.id, host.Decision{Approved: true, Approver: "manager@acme"}); err != nil {
				t.Errorf("approve: %v", err)
				return
			}
			a.mu.Lock()
			a.n++
			a.decided = time.Now()
			a.mu.Unlock()
		}
	}()
}

// stop stops the human.
func (a *approver) stop() {
	if a.quit != nil {
		close(a.quit)
		a.wg.Wait()
	}
}

func (a *approver) answered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func (a *approver) decidedAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.decided
}

func itoa(i int) string { return strconv.Itoa(i) }
