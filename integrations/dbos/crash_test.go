package tgdbos_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/audit"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
)

// waitApproval is the kill point the parent itself picks: the run
// published its question, told the approvers, and waits in DBOS Recv.
const waitApproval = "approval-wait"

// crashPoints are the points of the three-tool run (a read, an approved
// write, a second write) where the crash test kills the process: after
// each model turn's reply came back, after each dispatch the guard
// answered (the tool ran, the guard stored its outcome, DBOS had not
// recorded the step), and while the run waits for its human.
var crashPoints = []string{
	"",      // no crash: the reference run
	"turn1", // the model asked for get_order
	"dispatched:" + readTool + ":OK",
	"turn2", // the model asked for the refund
	"dispatched:" + refundTool + ":APPROVAL_REQUIRED", // the question, before it was recorded
	waitApproval,
	"dispatched:" + refundTool + ":OK", // the approved write ran
	"turn3",                            // the model asked for the note
	"dispatched:" + noteTool + ":OK",   // the second write ran
	"turn4",                            // the final answer
}

// TestCrashAnywhere runs the three-tool run in a child process, SIGKILLs
// it at each crash point, and lets a new process recover the workflow
// (DBOS recovery at launch) and finish it. Whatever the point: each write
// ran exactly once (counted in Redis), the human was asked once and
// answered once, the tenant's audit chain verifies with one executed
// record per write operation, and the run ends with the reference run's
// answer.
func TestCrashAnywhere(t *testing.T) {
	srv := modelServer(t)
	redisURL, prefix := redisFor(t)
	ctx := context.Background()
	var ref *durable.Result
	for i, point := range crashPoints {
		name := point
		if name == "" {
			name = "none"
		}
		ok := t.Run(strings.NewReplacer(":", "_").Replace(name), func(t *testing.T) {
			e := env{Postgres: postgresURL(t, "crash"+itoa(i)), Redis: redisURL, Prefix: prefix + "c" + itoa(i) + ":",
				Model: srv.BaseURL(), Kill: point,
				Run: durable.Run{ID: "refund-run-" + itoa(i), Principal: acme, Input: "refund ORDER-7"}}
			client := migratedClient(t, e.Postgres)
			first := startChild(t, roleStart, e)
			human := &approver{client: client, id: e.Run.ID}
			if point != waitApproval {
				human.start(t)
			}
			var res durable.Result
			switch point {
			case "":
				res = first.result(t)
			case waitApproval:
				waitForRecv(t, client, e.Run.ID)
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
			human.stop()
			check(t, ctx, e, res, human)
			if point == "" {
				ref = &res
				return
			}
			if ref == nil {
				t.Fatal("no reference run")
			}
			sameAnswer(t, res, *ref)
		})
		if !ok && point == "" {
			t.Fatal("the uninterrupted run failed: no point in crashing it")
		}
	}
}

// check asserts what every run, crashed or not, ends with.
func check(t *testing.T, ctx context.Context, e env, res durable.Result, human *approver) {
	t.Helper()
	if res.Status != durable.StatusCompleted {
		t.Fatalf("run %s: status %s (%s)", res.RunID, res.Status, res.Reason)
	}
	const want = "read OK; refund OK DRAFT-ORDER-7; note OK NOTE-ORDER-7"
	if res.Output != want {
		t.Errorf("final answer %q, want %q", res.Output, want)
	}
	opts, _ := redis.ParseURL(e.Redis)
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	sh := &shop{rdb: rdb, prefix: e.Prefix}
	for _, tool := range []string{refundTool, noteTool} {
		if n := sh.executions(ctx, tool); n != 1 {
			t.Errorf("%s ran %d times, want exactly once", tool, n)
		}
	}
	if n, _ := rdb.Get(ctx, e.Prefix+"asked").Int(); n != 1 {
		t.Errorf("the approvers were told %d times, want once", n)
	}
	if n := human.answered(); n != 1 {
		t.Errorf("the human answered %d questions, want one", n)
	}
	asked := 0
	for _, c := range res.Calls {
		if c.Asked {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("calls asked about: %d, want 1 (%+v)", asked, res.Calls)
	}
	st, err := idem.New(rdb, idem.Options{Prefix: e.Prefix, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := audit.Verify(ctx, st, acme.TenantID)
	if err != nil {
		t.Fatalf("the audit chain does not verify: %v", err)
	}
	recs, _, err := st.Audit(ctx, acme.TenantID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recs)) != n {
		t.Fatalf("audit: %d records, Verify read %d", len(recs), n)
	}
	// One executed record per write operation; every record of a write
	// names its run's scope-derived operation.
	executed := map[string]int{}
	ops := map[string]map[string]bool{}
	for _, r := range recs {
		var b audit.Body
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Tool != refundTool && b.Tool != noteTool {
			continue
		}
		if ops[b.Tool] == nil {
			ops[b.Tool] = map[string]bool{}
		}
		ops[b.Tool][b.Context.OperationID] = true
		if r.SideEffect == guard.SideEffectYes {
			executed[b.Tool+" "+b.Context.OperationID]++
		}
	}
	for _, tool := range []string{refundTool, noteTool} {
		if len(ops[tool]) != 1 {
			t.Errorf("audit: %s under operations %v, want one", tool, ops[tool])
		}
		for op := range ops[tool] {
			if want, _ := guard.ScopeIDs(e.Run.ID, ""); op == "" || !strings.HasPrefix(op, want[:3]) {
				t.Errorf("audit: %s operation %q is not a scope id", tool, op)
			}
			if executed[tool+" "+op] != 1 {
				t.Errorf("audit: %d executed records of %s %s, want 1", executed[tool+" "+op], tool, op)
			}
		}
	}
}

// sameAnswer asserts a recovered run ended as the reference run did: the
// same answer, turns and calls (a replayed call's delivery is a replay).
func sameAnswer(t *testing.T, got, ref durable.Result) {
	t.Helper()
	if got.Output != ref.Output || got.Status != ref.Status || got.Turns != ref.Turns || len(got.Calls) != len(ref.Calls) {
		t.Fatalf("recovered run: %+v\nreference: %+v", got, ref)
	}
	for i := range got.Calls {
		g, r := got.Calls[i], ref.Calls[i]
		g.Delivery, r.Delivery = "", ""
		if g != r {
			t.Errorf("call %d: %+v, reference %+v", i, got.Calls[i], ref.Calls[i])
		}
		if d := got.Calls[i].Delivery; !slices.Contains([]string{"fresh", "local_replay"}, d) {
			t.Errorf("call %d delivered %q", i, d)
		}
	}
}

// migratedClient creates the DBOS system database at url (a context that
// migrates it, shut down at once) and returns a DBOS client on it: the
// human's process.
func migratedClient(t *testing.T, url string) dbos.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: url, AppName: "tgdbos-test", ApplicationVersion: "test", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_ = dbos.Shutdown(dc, 5*time.Second)
	c, err := dbos.NewClient(context.Background(), dbos.ClientConfig{DatabaseURL: url, AppName: "tgdbos-test", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dbos.Shutdown(c, 5*time.Second) })
	return c
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
			if i := slices.Index(names, tgdbos.StepNotify); i >= 0 && slices.Contains(names[i:], "DBOS.sleep") {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the run never waited for its decision")
}

// approver is the human, in the test's process: it waits for the run's
// question and approves it, once.
type approver struct {
	client dbos.Client
	id     string
	mu     sync.Mutex
	n      int
	seen   []host.ApprovalRequest
	quit   chan struct{}
	wg     sync.WaitGroup
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
			a.seen = append(a.seen, *req)
			a.mu.Unlock()
			return
		}
	}()
}

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

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
