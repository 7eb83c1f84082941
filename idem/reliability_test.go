package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// redisDownstream is a downstream system that lives in Redis itself, so
// that several processes share it: each write INCRs a counter and stores a
// receipt under the downstream idempotency key.
type redisDownstream struct {
	rdb    redis.UniversalClient
	prefix string
	// block, when set, makes writes and reads wait after doing their work.
	block chan struct{}
}

type putIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type getIn struct {
	Key string `json:"key"`
}

func (d *redisDownstream) writes(t testing.TB) int {
	n, err := d.rdb.Get(context.Background(), d.prefix+"{ds}:writes").Int()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

func (d *redisDownstream) reads(t testing.TB) int {
	n, _ := d.rdb.Get(context.Background(), d.prefix+"{ds}:reads").Int()
	return n
}

// writeWithReceipt counts a write and stores its receipt, the JSON of
// {key, value, write}, atomically.
var writeWithReceipt = redis.NewScript(`local n = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1] .. n .. '}', 'PX', 3600000)
return n`)

func (d *redisDownstream) tools() *toolset.Set {
	put := toolset.Write("put", "Write a value.", func(ctx context.Context, inv *guard.Invocation, in putIn) (map[string]any, error) {

		start, _ := json.Marshal(map[string]any{"key": in.Key, "value": in.Value})
		n, err := writeWithReceipt.Run(ctx, d.rdb, []string{d.prefix + "{ds}:writes", d.prefix + "{ds}:receipt:" + inv.IdempotencyKey},
			string(start[:len(start)-1])+`,"write":`).Int64()
		if err != nil {
			return nil, guard.NotStarted(err)
		}
		out := map[string]any{"key": in.Key, "value": in.Value, "write": n}
		if d.block != nil {
			<-d.block
		}
		return out, nil
	}, &toolset.Options[putIn, map[string]any]{
		Receipt: func(ctx context.Context, inv *guard.Invocation) (map[string]any, bool, error) {
			b, err := d.rdb.Get(ctx, d.prefix+"{ds}:receipt:"+inv.IdempotencyKey).Bytes()
			if err == redis.Nil {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			var out map[string]any
			err = json.Unmarshal(b, &out)
			return out, err == nil, err
		},
	})
	get := toolset.Read("get", "Read a value.", func(ctx context.Context, _ *guard.Invocation, in getIn) (string, error) {
		d.rdb.Incr(ctx, d.prefix+"{ds}:reads")
		if d.block != nil {
			<-d.block
		}
		return "value of " + in.Key, nil
	}, nil)

	return toolset.MustNew(put, get)
}

func guardOn(t testing.TB, rdb redis.UniversalClient, prefix string, d *redisDownstream, clock guard.Clock) *guard.Guard {
	s, err := idem.New(rdb, idem.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return guard.New(d.tools(), s, guard.Options{Clock: clock, Lease: 10 * time.Second})
}

func putCall(callID, key string) guard.Call {
	return guard.Call{Principal: alice, Proposal: guard.Proposal{Name: "put", Arguments: []byte(`{"key":"a","value":"1"}`)},
		Context: guard.ExecutionContext{CallID: callID, IdempotencyKey: key}}
}

// TestConcurrentSameKey: 200 goroutines dispatch the same write with the
// same key at once: exactly one side effect; every other caller gets the
// replay or IN_PROGRESS, never a second execution; one audit record each.
func TestConcurrentSameKey(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		d := &redisDownstream{rdb: rdb, prefix: prefix}
		g := guardOn(t, rdb, prefix, d, nil)
		const n = 200
		results := make([]*guard.Result, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], _ = g.Dispatch(context.Background(), putCall(fmt.Sprintf("call-%d", i), "the-key"))
			}()
		}
		close(start)
		wg.Wait()
		tally := map[string]int{}
		for _, r := range results {
			tally[r.Code.String()+"/"+string(r.Delivery)]++
		}
		if tally["OK/fresh"] != 1 || tally["OK/fresh"]+tally["OK/local_replay"]+tally["IN_PROGRESS/fresh"] != n {
			t.Fatalf("results %v: want exactly one fresh OK, the rest replays or IN_PROGRESS", tally)
		}
		if w := d.writes(t); w != 1 {
			t.Fatalf("%d side effects, want 1", w)
		}
		if got, err := guard.VerifyAudit(context.Background(), g.Store().(guard.AuditLog), alice.TenantID); err != nil || got != n {
			t.Fatalf("audit: %d records, %v; want %d", got, err, n)
		}
		t.Logf("200 concurrent callers: %v", tally)
	})
}

// The worker process of the multi-process tests: it is this test binary
// re-executed with TOOLGUARD_WORKER set.
func TestMain(m *testing.M) {
	if mode := os.Getenv("TOOLGUARD_WORKER"); mode != "" {
		os.Exit(worker(mode))
	}
	os.Exit(redistest.Main(m))
}

func worker(mode string) int {
	prefix := os.Getenv("TOOLGUARD_WORKER_PREFIX")
	rdb, err := workerClient(os.Getenv("TOOLGUARD_WORKER_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rdb.Close()
	d := &redisDownstream{rdb: rdb, prefix: prefix}
	if mode == "block" {
		d.block = make(chan struct{}) // never closed: the process is killed mid-call
	}
	s, err := idem.New(rdb, idem.Options{Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	g := guard.New(d.tools(), s, guard.Options{Lease: 10 * time.Second})
	ctx := context.Background()
	switch mode {
	case "race":
		id := os.Getenv("TOOLGUARD_WORKER_ID")
		var wg sync.WaitGroup
		out := make(chan string, 25)
		for i := range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := g.Dispatch(ctx, putCall(fmt.Sprintf("proc-%s-call-%d", id, i), "shared-key"))
				if err != nil {
					out <- "ERR"
					return
				}
				out <- r.Code.String() + "/" + string(r.Delivery)
			}()
		}
		wg.Wait()
		close(out)
		for s := range out {
			fmt.Println(s)
		}
	case "block":
		what := os.Getenv("TOOLGUARD_WORKER_CALL")
		call := putCall("victim", "victim-key")
		if what == "read" {
			call = guard.Call{Principal: alice, Proposal: guard.Proposal{Name: "get", Arguments: []byte(`{"key":"a"}`)},
				Context: guard.ExecutionContext{CallID: "victim-read"}}
		}
		_, _ = g.Dispatch(ctx, call) // blocks forever after the side effect
	}
	return 0
}

// workerAddr gives child processes the backend as a URL they can reach it
// by (miniredis and the real servers all listen on TCP), with its user,
// password and database: redis://user:password@host:port/db for a server,
// redis://user:password@host:port?addr=host:port… for a cluster.
func workerAddr(t testing.TB, rdb redis.UniversalClient) string {
	u := url.URL{Scheme: "redis"}
	setUser := func(user, password string) {
		if password != "" {
			u.User = url.UserPassword(user, password)
		} else if user != "" {
			u.User = url.User(user)
		}
	}
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		u.Host, u.Path = o.Addr, "/"+strconv.Itoa(o.DB)
		setUser(o.Username, o.Password)
	case *redis.ClusterClient:
		o := c.Options()
		u.Host = o.Addrs[0]
		q := url.Values{}
		for _, a := range o.Addrs[1:] {
			q.Add("addr", a)
		}
		u.RawQuery = q.Encode()
		setUser(o.Username, o.Password)
	default:
		t.Fatalf("unknown client %T", rdb)
	}
	return u.String()
}

// workerClient is the child's client of what workerAddr gave it: a URL
// with ?addr= is a cluster.
func workerClient(addr string) (redis.UniversalClient, error) {
	if strings.Contains(addr, "addr=") {
		o, err := redis.ParseClusterURL(addr)
		if err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(addr)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o), nil
}

// The child processes reach the very database and account of the parent's
// client: TOOLGUARD_REDIS_URL=redis://…/1 once made them work in database
// 0, where the parent never looked.
func TestWorkerClientKeepsDatabaseAndAccount(t *testing.T) {
	for _, parent := range []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: "127.0.0.1:16379", DB: 3, Username: "bench", Password: "p@ss:w/rd"}),
		redis.NewClient(&redis.Options{Addr: "127.0.0.1:16379"}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:17001", "127.0.0.1:17002"}, Username: "u", Password: "secret"}),
	} {
		child, err := workerClient(workerAddr(t, parent))
		if err != nil {
			t.Fatal(err)
		}
		switch p := parent.(type) {
		case *redis.Client:
			po, co := p.Options(), child.(*redis.Client).Options()
			if co.Addr != po.Addr || co.DB != po.DB || co.Username != po.Username || co.Password != po.Password {
				t.Errorf("child %s db %d user %q password %q, want %s %d %q %q", co.Addr, co.DB, co.Username, co.Password,
					po.Addr, po.DB, po.Username, po.Password)
			}
		case *redis.ClusterClient:
			po, co := p.Options(), child.(*redis.ClusterClient).Options()
			if strings.Join(co.Addrs, ",") != strings.Join(po.Addrs, ",") || co.Username != po.Username || co.Password != po.Password {
				t.Errorf("child %v user %q password %q, want %v %q %q", co.Addrs, co.Username, co.Password, po.Addrs, po.Username, po.Password)
			}
		}
		_ = parent.Close()
		_ = child.Close()
	}
}

func startWorker(t *testing.T, mode, addr, prefix string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TOOLGUARD_WORKER="+mode, "TOOLGUARD_WORKER_ADDR="+addr, "TOOLGUARD_WORKER_PREFIX="+prefix)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestConcurrentProcesses: 8 processes of 25 goroutines each dispatch the
// same write with the same key: one side effect in all.
func TestConcurrentProcesses(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		addr := workerAddr(t, rdb)
		const procs = 8
		outs := make([]string, procs)
		var wg sync.WaitGroup
		for p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := startWorker(t, "race", addr, prefix, "TOOLGUARD_WORKER_ID="+strconv.Itoa(p))
				b, err := cmd.Output()
				if err != nil {
					t.Errorf("worker %d: %v", p, err)
				}
				outs[p] = string(b)
			}()
		}
		wg.Wait()
		tally := map[string]int{}
		for _, o := range outs {
			sc := bufio.NewScanner(strings.NewReader(o))
			for sc.Scan() {
				tally[sc.Text()]++
			}
		}
		d := &redisDownstream{rdb: rdb, prefix: prefix}
		if tally["OK/fresh"] != 1 || tally["OK/fresh"]+tally["OK/local_replay"]+tally["IN_PROGRESS/fresh"] != procs*25 {
			t.Fatalf("results over %d processes: %v", procs, tally)
		}
		if w := d.writes(t); w != 1 {
			t.Fatalf("%d side effects over %d processes, want 1", w, procs)
		}
		s, _ := idem.New(rdb, idem.Options{Prefix: prefix})
		if got, err := guard.VerifyAudit(context.Background(), s, alice.TenantID); err != nil || got != procs*25 {
			t.Fatalf("audit: %d records, %v", got, err)
		}
		t.Logf("8 processes x 25 callers: %v", tally)
	})
}

// TestWorkerKilledMidCall: a worker process is killed after its write's
// side effect and before the commit. The write is held by its lease, then
// becomes unknown — never executed again — and a status query settles it
// from the receipt. A read killed the same way simply runs again.
func TestWorkerKilledMidCall(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		d := &redisDownstream{rdb: rdb, prefix: prefix}
		addr := workerAddr(t, rdb)

		kill := func(call string, done func() bool) {
			cmd := startWorker(t, "block", addr, prefix, "TOOLGUARD_WORKER_CALL="+call)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for !done() {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("worker never reached the %s's side effect", call)
				}
				time.Sleep(10 * time.Millisecond)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		kill("write", func() bool { return d.writes(t) == 1 })

		var skew time.Duration
		clock := guard.ClockFunc(func() time.Time { return time.Now().Add(skew) })
		g := guardOn(t, rdb, prefix, d, clock)
		ctx := context.Background()
		r, _ := g.Dispatch(ctx, putCall("retry-1", "victim-key"))
		if r.Code != guard.CodeInProgress {
			t.Fatalf("during the dead worker's lease: %s, want IN_PROGRESS", r)
		}
		skew = 11 * time.Second // past the 10 s lease
		r, _ = g.Dispatch(ctx, putCall("retry-2", "victim-key"))
		if r.Code != guard.CodeOutcomeUnknown || r.OperationID != "victim" {
			t.Fatalf("after the lease: %s, want OUTCOME_UNKNOWN for operation victim", r)
		}
		if w := d.writes(t); w != 1 {
			t.Fatalf("%d side effects: the write ran again", w)
		}
		s, _ := g.QueryStatus(ctx, guard.StatusCall{Principal: alice, OperationID: "victim"})
		if s.Code != guard.CodeOK || s.Delivery != guard.DeliveryReceiptReconciled {
			t.Fatalf("status query: %s, want OK from the receipt", s)
		}

		kill("read", func() bool { return d.reads(t) == 1 })
		r, _ = g.Dispatch(ctx, guard.Call{Principal: alice, Proposal: guard.Proposal{Name: "get", Arguments: []byte(`{"key":"a"}`)},
			Context: guard.ExecutionContext{CallID: "victim-read"}})
		if r.Code != guard.CodeOK || r.Delivery != guard.DeliveryFresh || d.reads(t) != 2 {
			t.Fatalf("read after its worker died: %s, reads %d; want a fresh run", r, d.reads(t))
		}
		if _, err := guard.VerifyAudit(ctx, g.Store().(guard.AuditLog), alice.TenantID); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClockSkew: lease expiry is decided on each guard's own clock. A
// worker whose clock runs ahead by less than the lease sees IN_PROGRESS;
// one ahead by more sees the write unknown. Neither executes it again, and
// the holder's late commit stores the truth.
func TestClockSkew(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		d := &redisDownstream{rdb: rdb, prefix: prefix, block: make(chan struct{})}
		base := time.Now()
		at := func(off time.Duration) guard.Clock { return guard.ClockFunc(func() time.Time { return base.Add(off) }) }
		holder := guardOn(t, rdb, prefix, d, at(0))
		done := make(chan *guard.Result)
		go func() { r, _ := holder.Dispatch(context.Background(), putCall("c0", "k")); done <- r }()
		for d.writes(t) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		ahead := guardOn(t, rdb, prefix, &redisDownstream{rdb: rdb, prefix: prefix}, at(5*time.Second))
		far := guardOn(t, rdb, prefix, &redisDownstream{rdb: rdb, prefix: prefix}, at(15*time.Second))
		if r, _ := ahead.Dispatch(context.Background(), putCall("c1", "k")); r.Code != guard.CodeInProgress {
			t.Fatalf("clock 5 s ahead: %s, want IN_PROGRESS", r)
		}
		if r, _ := far.Dispatch(context.Background(), putCall("c2", "k")); r.Code != guard.CodeOutcomeUnknown {
			t.Fatalf("clock 15 s ahead: %s, want OUTCOME_UNKNOWN", r)
		}
		close(d.block)
		if r := <-done; r.Code != guard.CodeOK {
			t.Fatalf("holder: %s", r)
		}
		if r, _ := far.Dispatch(context.Background(), putCall("c3", "k")); r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay {
			t.Fatalf("after the late commit: %s, want the replay", r)
		}
		if w := d.writes(t); w != 1 {
			t.Fatalf("%d side effects, want 1", w)
		}
	})
}
