package pgstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// The kill test: a child process (this test binary, role killChild) runs
// transactional writes in a loop, four at a time, and is SIGKILLed at
// random moments, half of them the moment a tool returned (its outcome's
// commit and COMMIT are on their way: the kill lands inside COMMIT or just
// before it). Then every operation is checked: its effect rows number 0 or
// 1, and 1 for every acknowledged one; the model was never told
// OUTCOME_UNKNOWN; a status query decides every operation a child did not
// live to acknowledge (OK with its row, NOT_FOUND without), and a retry
// makes it exactly one row; the tenant's audit chain verifies, with a
// record for every acknowledged write and none unknown.
//
// CI kills 20 children; the full run kills 200 or more:
//
//	TOOLGUARD_PG_KILLS=200 go test ./pgstore -run TestKilledWriters -count=1 -v

const (
	envKillChild = "TGPG_KILL_CHILD" // the child's database URL
	envKillGen   = "TGPG_KILL_GEN"   // the child's generation, in its keys
)

// TestMain runs a kill test's child when the environment names one.
func TestMain(m *testing.M) {
	if u := os.Getenv(envKillChild); u != "" {
		os.Exit(killChild(u, os.Getenv(envKillGen)))
	}
	os.Exit(m.Run())
}

// EffectIn is the input of the kill test's tool.
type EffectIn struct {
	N int `json:"n"`
}

// effectTool inserts the operation's effect row; done is told when it
// returns, before the guard commits.
func effectTool(done func(key string)) toolset.Declared {
	return pgstore.WriteTx("effect", "Write an effect row.", func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in EffectIn) (map[string]int64, error) {
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO effects (op, n) VALUES ($1, $2) RETURNING id", inv.Context.IdempotencyKey, in.N).Scan(&id); err != nil {
			return nil, err
		}
		done(inv.Context.IdempotencyKey)
		return map[string]int64{"id": id, "n": int64(in.N)}, nil
	}, nil)
}

var killer = guard.Principal{TenantID: "tenant-kill", SubjectID: "writer"}

// killChild writes until it is killed: START before a dispatch, TOOLDONE
// when the tool returned, ACK with the answer's code and delivery.
func killChild(u, gen string) int {
	ctx := context.Background()
	pool := mustPool(u)
	s, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	g := guard.New(toolset.MustNew(effectTool(func(key string) { say("TOOLDONE %s", key) })), s, guard.Options{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("g%s-w%d-%d", gen, w, i)
				say("START %s", key)
				res, err := g.Dispatch(ctx, guard.Call{Principal: killer, Proposal: guard.Proposal{Name: "effect", Arguments: []byte(`{"n":` + strconv.Itoa(i) + `}`)},
					Context: guard.ExecutionContext{Provider: "kill", CallID: "c-" + key, IdempotencyKey: key}})
				if err != nil {
					say("HOSTERROR %s %v", key, err)
					continue
				}
				say("ACK %s %s %s", key, res.Code, res.Delivery)
			}
		})
	}
	wg.Wait()
	return 0
}

func mustPool(u string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(u)
	if err == nil {
		cfg.MaxConns = 8
	}
	var p *pgxpool.Pool
	if err == nil {
		p, err = pgxpool.NewWithConfig(context.Background(), cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	return p
}

// killState is what the parent learnt of the children's operations.
type killState struct {
	started map[string]bool
	acked   map[string]string // key → "CODE delivery"
	// inCommit counts the kills that came after a tool returned and
	// before its dispatch was acknowledged.
	inCommit int
}

func TestKilledWriters(t *testing.T) {
	kills := 20
	if v := os.Getenv("TOOLGUARD_PG_KILLS"); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	srv := pgtest.StartServer(t, pgtest.ServerOptions{})
	db := srv.CreateDB("kills")
	ctx := context.Background()
	direct := pgtest.Pool(t, db, 4)
	if _, err := direct.Exec(ctx, "CREATE TABLE effects (id bigserial PRIMARY KEY, op text NOT NULL, n int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	store, err := pgstore.New(ctx, direct, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &killState{started: map[string]bool{}, acked: map[string]string{}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	for k := range kills {
		st.runChild(t, db+"&application_name=tgkill", k, rng)
		// Recovery: the dead child's sessions end (a COMMIT it sent
		// before it died completes first).
		deadline := time.Now().Add(30 * time.Second)
		for {
			var n int
			if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tgkill'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d's %d sessions still open 30s after it was killed", k, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("%d children killed; %d operations started, %d acknowledged; %d kills after a tool returned and before its answer",
		kills, len(st.started), len(st.acked), st.inCommit)
	if kills >= 20 && st.inCommit < kills/4 {
		t.Errorf("only %d of %d kills landed between a tool's return and its answer: the commit window was not tested", st.inCommit, kills)
	}

	// Every operation: 0 or 1 rows; 1 when acknowledged OK; never told
	// OUTCOME_UNKNOWN.
	rows := effectRows(t, direct)
	g := guard.New(toolset.MustNew(effectTool(func(string) {})), store, guard.Options{})
	byKey := func(key string) int { return rows[key] }
	for key, ans := range st.acked {
		if strings.HasPrefix(ans, "OUTCOME_UNKNOWN") || !strings.HasPrefix(ans, "OK ") {
			t.Errorf("%s was answered %s", key, ans)
		}
		if n := byKey(key); n != 1 {
			t.Errorf("%s acknowledged %s has %d rows, want 1", key, ans, n)
		}
	}
	unacked, committed := 0, 0
	for key := range st.started {
		if _, ok := st.acked[key]; ok {
			continue
		}
		unacked++
		n := byKey(key)
		if n > 1 {
			t.Errorf("%s has %d rows", key, n)
		}
		// The status query decides: OK with its row, NOT_FOUND without.
		res, err := g.QueryStatus(ctx, guard.StatusCall{Principal: killer, OperationID: "c-" + key, Tool: "effect",
			Context: guard.ExecutionContext{Provider: "kill", CallID: "q-" + key, IdempotencyKey: key}})
		if err != nil {
			t.Fatal(err)
		}
		want := guard.CodeNotFound
		if n == 1 {
			want = guard.CodeOK
			committed++ // its COMMIT reached Postgres, its answer never the child
		}
		if res.Code != want {
			t.Errorf("%s (%d rows, not acknowledged): status %s, want %s", key, n, res, want)
		}
		// A retry makes it exactly one row.
		res, err = g.Dispatch(ctx, guard.Call{Principal: killer, Proposal: guard.Proposal{Name: "effect", Arguments: []byte(`{"n":` + keyN(key) + `}`)},
			Context: guard.ExecutionContext{Provider: "kill", CallID: "c-" + key, IdempotencyKey: key}})
		if err != nil || res.Code != guard.CodeOK {
			t.Errorf("%s retried: %v %v", key, res, err)
		}
		var after int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM effects WHERE op = $1", key).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != 1 {
			t.Errorf("%s has %d rows after its retry, want 1", key, after)
		}
	}
	t.Logf("%d operations not acknowledged, %d of them committed (the kill came after COMMIT left) and %d not: each decided by its status query and made one row by its retry",
		unacked, committed, unacked-committed)
	if kills >= 20 && committed == 0 {
		t.Errorf("no kill came between a COMMIT and its answer")
	}

	// The audit chain verifies; no record is unknown; every acknowledged
	// write has its record.
	n, err := guard.VerifyAudit(ctx, store, killer.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := store.Audit(ctx, killer.TenantID, 0, int(n))
	if err != nil {
		t.Fatal(err)
	}
	okByCall := map[string]bool{}
	for _, rec := range recs {
		if rec.Code == guard.CodeOutcomeUnknown || rec.SideEffect == guard.SideEffectUnknown {
			t.Errorf("audit record %d is %s/%s", rec.Seq, rec.Code, rec.SideEffect)
		}
		var body guard.AuditBody
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code == guard.CodeOK {
			okByCall[body.Context.CallID] = true
		}
	}
	for key := range st.acked {
		if !okByCall["c-"+key] {
			t.Errorf("%s was acknowledged OK without an audit record", key)
		}
	}
	t.Logf("audit: %d records, chain verified", n)
}

// effectRows counts the effect rows of each operation key.
func effectRows(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows := map[string]int{}
	r, err := pool.Query(context.Background(), "SELECT op, count(*) FROM effects GROUP BY op")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var op string
		var n int
		if err := r.Scan(&op, &n); err != nil {
			t.Fatal(err)
		}
		rows[op] = n
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// keyN is the n a key's operation was dispatched with.
func keyN(key string) string { return key[strings.LastIndexByte(key, '-')+1:] }

// runChild starts child k, kills it, and reads what it said.
func (st *killState) runChild(t *testing.T, db string, k int, rng *rand.Rand) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), envKillChild+"="+db, envKillGen+"="+strconv.Itoa(k))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	// Half the kills at a random moment after the first answer, half the
	// moment a tool returned once some writes are done.
	atTool := k%2 == 1
	after := 1 + rng.IntN(30)
	var timer <-chan time.Time
	toolDone := map[string]bool{}
	acks := 0
	killed := false
	kill := func() {
		if !killed {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			pending := 0
			for key := range toolDone {
				if _, ok := st.acked[key]; !ok {
					pending++
				}
			}
			if pending > 0 {
				st.inCommit++
			}
		}
	}
	deadline := time.After(30 * time.Second)
	for lines != nil {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				break
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "START":
				st.started[f[1]] = true
			case "TOOLDONE":
				toolDone[f[1]] = true
				if atTool && acks >= after && !killed {
					if d := rng.IntN(400); d > 0 {
						time.Sleep(time.Duration(d) * time.Microsecond)
					}
					kill()
				}
			case "ACK":
				// Printed, it was told: acknowledged, even if the kill
				// was on its way.
				st.acked[f[1]] = strings.Join(f[2:], " ")
				acks++
				if !atTool && acks == 1 {
					timer = time.After(time.Duration(5+rng.IntN(80)) * time.Millisecond)
				}
			case "HOSTERROR":
				t.Errorf("child: %s", line)
			}
		case <-timer:
			kill()
		case <-deadline:
			kill()
			t.Errorf("child %d ran 30s without being killed", k)
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child %d ended on its own", k)
	}
}
