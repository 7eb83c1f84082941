package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// The server's faults under load: Postgres restarted (fast and immediate
// shutdown) and a synchronous standby promoted after the primary is
// killed, while writers run transactional writes (rows in the store's
// database) and ordinary writes (an effect outside it, with a receipt).
// What must hold afterwards: 0 acknowledged writes lost (an OK answer has
// its row, or its effect), 0 run twice (at most one row, one effect), 0 OK
// without an audit record, a transactional write never OUTCOME_UNKNOWN,
// and every write not acknowledged decided by a status query.

// load is the writers, their tools and what they were told.
type load struct {
	g      *guard.Guard
	store  *pgstore.Store
	mu     sync.Mutex
	effect map[string]int    // ordinary writes' effects by downstream key
	told   map[string]string // key → "CODE delivery", the last answer
	ops    map[string]string // key → tool
	n      atomic.Int64
}

// OrdinaryIn is the ordinary write's input.
type OrdinaryIn struct {
	N int `json:"n"`
}

func newLoad(t *testing.T, pool *pgxpool.Pool, opts pgstore.Options) *load {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (id bigserial PRIMARY KEY, op text NOT NULL, n int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := &load{store: s, effect: map[string]int{}, told: map[string]string{}, ops: map[string]string{}}
	ordinary := toolset.Write("ordinary", "Write an effect elsewhere.", func(_ context.Context, inv *guard.Invocation, in OrdinaryIn) (map[string]int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.effect[inv.Context.IdempotencyKey]++
		return map[string]int{"n": in.N}, nil
	}, &toolset.Options[OrdinaryIn, map[string]int]{Receipt: func(_ context.Context, inv *guard.Invocation) (map[string]int, bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		// The status queries name the key: the test's downstream system
		// knows its effects by it.
		if l.effect[inv.Context.IdempotencyKey] > 0 {
			return map[string]int{"n": -1}, true, nil
		}
		return nil, false, nil
	}})
	l.g = guard.New(toolset.MustNew(effectTool(func(string) {}), ordinary), s, guard.Options{Lease: 2 * time.Second})
	return l
}

// call dispatches the key's write with the tool, and records the answer.
func (l *load) call(ctx context.Context, tool, key string) *guard.Result {
	args := `{"n":1}`
	res, err := l.g.Dispatch(ctx, guard.Call{Principal: killer, Proposal: guard.Proposal{Name: tool, Arguments: []byte(args)},
		Context: guard.ExecutionContext{Provider: "crash", CallID: "c-" + key, IdempotencyKey: key}})
	if err != nil {
		res = &guard.Result{Code: guard.CodeUnavailable}
	}
	l.mu.Lock()
	l.told[key], l.ops[key] = res.Code.String()+" "+string(res.Delivery), tool
	l.mu.Unlock()
	return res
}

// run runs writers until stop is closed: each writes a new key at a time,
// transactional and ordinary in turn, with a 2s deadline per call.
func (l *load) run(writers int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tool := "effect"
				if i%3 == 2 {
					tool = "ordinary"
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				l.call(ctx, tool, fmt.Sprintf("w%d-%d", w, i))
				cancel()
				l.n.Add(1)
			}
		})
	}
	return &wg
}

// tally is what check found: acknowledged writes lost, writes run twice,
// acknowledged OK without an audit record, transactional writes told
// OUTCOME_UNKNOWN.
type tally struct{ lost, twice, noAudit, unknownTx int }

// check checks what the writers were told against what the database and
// the downstream system hold, on pool (the primary now): a status query
// must decide each write not acknowledged, as its effects say. It returns
// the counts for the caller to judge (lost is expected after a failover
// to a standby that lagged), logging each write counted.
func (l *load) check(t *testing.T, pool *pgxpool.Pool) tally {
	t.Helper()
	ctx := context.Background()
	rows := effectRows(t, pool)
	count := func(key string) int {
		if l.ops[key] == "effect" {
			return rows[key]
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.effect[key]
	}
	acked, lost, twice, unknownTx, inProgress, open := 0, 0, 0, 0, 0, 0
	logged := 0
	logf := func(format string, args ...any) { // the first few of each run
		if logged++; logged <= 10 {
			t.Logf(format, args...)
		}
	}
	for key, told := range l.told {
		n := count(key)
		if n > 1 {
			twice++
			logf("%s (%s) ran %d times", key, l.ops[key], n)
		}
		switch {
		case strings.HasPrefix(told, "OK "):
			acked++
			if n != 1 {
				lost++
				logf("%s (%s) was acknowledged %s and has %d effects", key, l.ops[key], told, n)
			}
			continue
		case strings.HasPrefix(told, "OUTCOME_UNKNOWN") && l.ops[key] == "effect":
			unknownTx++
			logf("%s, a transactional write, was told %s", key, told)
		case strings.HasPrefix(told, "IN_PROGRESS"):
			inProgress++
		}
		// Not acknowledged: a status query decides it (a transactional
		// write's from the store; an ordinary write's from its receipt,
		// once its lease is over).
		open++
		res, err := l.g.QueryStatus(ctx, guard.StatusCall{Principal: killer, OperationID: "c-" + key, Tool: l.ops[key],
			Context: guard.ExecutionContext{Provider: "crash", CallID: "q-" + key, IdempotencyKey: key}})
		if err != nil {
			t.Fatal(err)
		}
		want := guard.CodeNotFound
		if n == 1 {
			want = guard.CodeOK
		}
		if res.Code != want {
			t.Errorf("%s (%s, told %s, %d effects): status %s, want %s", key, l.ops[key], told, n, res.Code, want)
		}
	}
	// Every acknowledged write has its audit record; the chain verifies.
	total, err := guard.VerifyAudit(ctx, l.store, killer.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := l.store.Audit(ctx, killer.TenantID, 0, int(total))
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	for _, rec := range recs {
		var body guard.AuditBody
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code == guard.CodeOK && body.Action == "dispatch" {
			ok[body.Context.CallID] = true
		}
	}
	noAudit := 0
	for key, told := range l.told {
		if strings.HasPrefix(told, "OK ") && !ok["c-"+key] {
			noAudit++
			logf("%s was acknowledged OK without an audit record", key)
		}
	}
	t.Logf("%d writes, %d acknowledged: %d lost, %d run twice, %d OK without an audit record, %d transactional told OUTCOME_UNKNOWN; "+
		"%d not acknowledged (%d IN_PROGRESS), each decided by its status query; %d audit records verified",
		len(l.told), acked, lost, twice, noAudit, unknownTx, open, inProgress, total)
	return tally{lost, twice, noAudit, unknownTx}
}

// want fails t unless the tally is all zeros.
func (tl tally) want(t *testing.T, zero tally) {
	t.Helper()
	if tl != zero {
		t.Errorf("lost %d, run twice %d, OK without an audit record %d, transactional told OUTCOME_UNKNOWN %d: want %+v",
			tl.lost, tl.twice, tl.noAudit, tl.unknownTx, zero)
	}
}

// TestRestartUnderLoad: Postgres (fsync on) is stopped with a fast
// shutdown and started again, then with an immediate one (no checkpoint:
// recovery from the WAL), while eight writers run.
func TestRestartUnderLoad(t *testing.T) {
	srv := pgtest.StartServer(t, pgtest.ServerOptions{Durable: true})
	db := srv.CreateDB("restart")
	pool := pgtest.Pool(t, db, 16)
	l := newLoad(t, pool, pgstore.Options{SettleTimeout: 5 * time.Second})
	stop := make(chan struct{})
	wg := l.run(8, stop)
	for _, mode := range []string{"fast", "immediate"} {
		time.Sleep(time.Second)
		before := l.n.Load()
		srv.Stop(mode)
		time.Sleep(300 * time.Millisecond)
		srv.Start()
		t.Logf("%s shutdown after %d writes", mode, before)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	time.Sleep(2 * time.Second) // the ordinary writes' leases end
	l.check(t, pool).want(t, tally{})
}

// TestStandbyPromoted: a primary with a standby is SIGKILLed under load
// and the standby promoted; the store's pool names both hosts with
// target_session_attrs=read-write, so it finds the new primary. The
// standby reaches the primary through a proxy, which stalls it for a
// second before the kill: what the primary acknowledged meanwhile is on
// the standby only if it is synchronous (synchronous_standby_names,
// synchronous_commit on). Synchronous: 0 acknowledged writes lost (the
// commits wait for the standby, so the stalled second acknowledges
// nothing). Asynchronous, the control: the writes acknowledged during the
// stall are lost, and the test requires that it loses some.
func TestStandbyPromoted(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "synchronous", false: "asynchronous"}[sync], func(t *testing.T) {
			primary := pgtest.StartServer(t, pgtest.ServerOptions{Durable: true})
			primary.CreateDB("failover")
			link := redistest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", primary.Port))
			standby := primary.StandbyVia("standby1", sync, link.Addr())
			both := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/failover?connect_timeout=2&sslmode=disable&target_session_attrs=read-write",
				primary.Port, standby.Port)
			pool := pgtest.Pool(t, both, 16)
			l := newLoad(t, pool, pgstore.Options{Timeout: 2 * time.Second, SettleTimeout: 6 * time.Second})
			stop := make(chan struct{})
			wg := l.run(8, stop)
			time.Sleep(time.Second)
			link.Pause()
			time.Sleep(time.Second)
			before := l.n.Load()
			primary.Kill()
			link.Cut()
			standby.Promote()
			t.Logf("the standby stalled for 1s, the primary killed after %d writes, the standby promoted", before)
			time.Sleep(1500 * time.Millisecond)
			close(stop)
			wg.Wait()
			time.Sleep(2 * time.Second)
			var inRecovery bool
			if err := pool.QueryRow(context.Background(), "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || inRecovery {
				t.Fatalf("the pool is not on the promoted standby: %v %v", inRecovery, err)
			}
			tl := l.check(t, pool)
			if sync {
				tl.want(t, tally{})
				return
			}
			if tl.lost == 0 {
				t.Errorf("an asynchronous standby lost no acknowledged write: the stall did not bite, and the synchronous run proves nothing")
			}
			tl.lost, tl.noAudit = 0, 0
			tl.want(t, tally{})
		})
	}
}
