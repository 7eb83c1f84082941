// Command toolbench is a load generator for the guard: many concurrent
// agents dispatch a mix of reads, fresh writes and replays against a Redis
// server or cluster, and the same number of raw Redis round trips is then
// issued without the guard, on the same connection pool, to measure the
// floor that Redis itself sets.
//
//	go run ./cmd/toolbench -redis redis://127.0.0.1:6379/0 -c 64 -n 100000
//
// It prints throughput, latency percentiles, Redis round trips per dispatch,
// Go heap and Redis memory per stored dispatch, and last the line
//
//	guard/floor = X.XX
//
// the guard's wall time per dispatch over the floor's wall time per dispatch
// at the same round-trip count: 1.00 would mean the guard costs nothing
// beyond the Redis round trips it needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/toolset"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolbench:", err)
		os.Exit(2)
	}
}

type config struct {
	addr          string
	c, n          int
	reads, writes int // percentages; the rest are replays
	tenants       int
	pool          int
	keepKeys      bool
	cpuProfile    string
	prefix        string
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("toolbench", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.addr, "redis", "redis://127.0.0.1:6379/0", "a redis:// URL, or a comma-separated host:port list for a cluster")
	fs.IntVar(&cfg.c, "c", 64, "concurrent agents")
	fs.IntVar(&cfg.n, "n", 100000, "dispatches in all")
	fs.IntVar(&cfg.reads, "reads", 50, "percent of dispatches that are reads")
	fs.IntVar(&cfg.writes, "writes", 30, "percent that are fresh writes (the rest replay an earlier write)")
	fs.IntVar(&cfg.tenants, "tenants", 16, "tenants the agents act for (spread over cluster slots)")
	fs.IntVar(&cfg.pool, "pool", 0, "Redis connection pool size (default: go-redis's, 10 per CPU)")
	fs.BoolVar(&cfg.keepKeys, "keep", false, "keep the run's keys in Redis afterwards")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the guard's run (not the floor's) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.c < 1 || cfg.n < cfg.c || cfg.reads < 0 || cfg.writes < 0 || cfg.reads+cfg.writes > 100 || cfg.tenants < 1 {
		return errors.New("need -c >= 1, -n >= -c, 0 <= -reads + -writes <= 100, -tenants >= 1")
	}
	rdb, err := redisconn.Open(cfg.addr, cfg.pool)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rt := &redisconn.RoundTrips{}
	rdb.AddHook(rt)
	cfg.prefix = fmt.Sprintf("tgbench:%d:", time.Now().UnixNano())
	store, err := idem.New(rdb, idem.Options{Prefix: cfg.prefix, TTL: time.Hour})
	if err != nil {
		return err
	}
	ctx := context.Background()
	signer, _ := guard.NewSigner([]byte("toolbench-approval-key-0123456789abcdef"))
	g := guard.New(benchTools(), store, guard.Options{Signer: signer})

	// Everything the run keeps is allocated before the heap is measured:
	// fixed-size latency histograms and bounded key lists per agent.
	hists := make([]histogram, cfg.c)
	agents := make([]*agent, cfg.c)
	for a := range agents {
		agents[a] = newAgent(a, cfg, signer)
	}
	// Fill the connection pool first: its buffers are not the guard's growth.
	var warm sync.WaitGroup
	for range cfg.c {
		warm.Go(func() {
			for range 10 {
				rdb.Ping(ctx)
			}
		})
	}
	warm.Wait()
	memBefore := redisconn.UsedMemory(ctx, rdb)
	heapBefore := heapInUse()
	fmt.Fprintf(w, "toolbench: %d dispatches, %d agents, %d%% reads, %d%% writes, %d%% replays, %d tenants\n",
		cfg.n, cfg.c, cfg.reads, cfg.writes, 100-cfg.reads-cfg.writes, cfg.tenants)

	// The guard's run.
	var next atomic.Int64
	var failures atomic.Int64
	codes := make([]map[guard.Code]int, cfg.c)
	for a := range codes {
		codes[a] = map[guard.Code]int{}
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	// INFO is a round trip too: read before counting starts, and after it ends.
	guardCost := measure(ctx, rdb)
	rt.Reset()
	start := time.Now()
	var wg sync.WaitGroup
	for a := range cfg.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := agents[a]
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.n {
					return
				}
				call, want := agent.next(i)
				t0 := time.Now()
				res, err := g.Dispatch(ctx, call)
				hists[a].add(time.Since(t0))
				if err != nil || res.Code != want {
					failures.Add(1)
				}
				if res != nil {
					codes[a][res.Code]++
				}
			}
		}()
	}
	wg.Wait()
	guardTime := time.Since(start)
	roundTrips := rt.Count()
	guardCost = measure(ctx, rdb).since(guardCost)
	if cfg.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	heapAfter := heapInUse()
	memAfter := redisconn.UsedMemory(ctx, rdb)

	// The floor: the same round trips, no guard.
	floorCost := measure(ctx, rdb)
	floorTime, err := floor(ctx, rdb, cfg.c, roundTrips)
	if err != nil {
		return err
	}
	floorCost = measure(ctx, rdb).since(floorCost)
	if !cfg.keepKeys {
		cleanup(ctx, rdb, cfg.prefix)
	}

	all := map[guard.Code]int{}
	for _, m := range codes {
		for c, k := range m {
			all[c] += k
		}
	}
	var lat histogram
	for i := range hists {
		lat.merge(&hists[i])
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(cfg.n) }
	fmt.Fprintf(w, "results:     %s\n", formatCodes(all))
	if f := failures.Load(); f > 0 {
		fmt.Fprintf(w, "unexpected:  %d dispatches did not get the expected code\n", f)
	}
	fmt.Fprintf(w, "throughput:  %.0f dispatches/s (%v in all)\n", float64(cfg.n)/guardTime.Seconds(), guardTime.Round(time.Millisecond))
	fmt.Fprintf(w, "latency:     p50 %v  p99 %v  p999 %v  max %v\n", lat.quantile(0.50), lat.quantile(0.99), lat.quantile(0.999), lat.max)
	fmt.Fprintf(w, "round trips: %.3f per dispatch (%d in all)\n", float64(roundTrips)/float64(cfg.n), roundTrips)
	fmt.Fprintf(w, "floor:       %d raw EVALSHA round trips in %v, %.0f/s\n", roundTrips, floorTime.Round(time.Millisecond), float64(roundTrips)/floorTime.Seconds())
	fmt.Fprintf(w, "go heap:     %.1f MiB in use before, %.1f MiB after (after GC)\n", mib(heapBefore), mib(heapAfter))
	if memBefore > 0 && memAfter > 0 {
		stored := cfg.n
		fmt.Fprintf(w, "redis:       used_memory +%.1f MiB, %.0f bytes per stored dispatch (records, bindings, audit)\n",
			mib(memAfter-memBefore), float64(memAfter-memBefore)/float64(stored))
	}
	_, cluster := rdb.(*redis.ClusterClient)
	for _, run := range []struct {
		name string
		c    cost
	}{{"guard", guardCost}, {"floor", floorCost}} {
		fmt.Fprintf(w, "cpu, %s:  client %v, redis %v (of which scripts %v) per dispatch\n",
			run.name, per(run.c.client), per(run.c.redis), per(run.c.scripts))
	}
	fmt.Fprintf(w, "per dispatch: guard %v, floor %v at the same round trips\n", per(guardTime), per(floorTime))
	if guardCost.redis > 0 && !cluster {
		// One Redis thread serves every dispatch, so the guard's run can be
		// no faster than Redis's CPU per dispatch.
		fmt.Fprintf(w, "redis bound:  guard/floor >= %.2f (Redis CPU per dispatch over floor time per dispatch)\n",
			float64(guardCost.redis)/float64(floorTime))
	}
	fmt.Fprintf(w, "guard/floor = %.2f\n", float64(guardTime)/float64(floorTime))
	return nil
}

// agent makes one agent's calls: reads, fresh writes with new keys, and
// replays of its earlier writes (a new call id, the same key and intent).
type agent struct {
	id      int
	cfg     config
	p       guard.Principal
	grant   string
	rng     *rand.Rand
	written []string // the latest maxWritten keys, replayed at random
}

// maxWritten bounds an agent's replayable keys, so the run's memory does not
// grow with -n.
const maxWritten = 1024

var (
	readArgs  = []byte(`{"order_ref":"ORDER-7"}`)
	writeArgs = []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)
)

func newAgent(id int, cfg config, signer *guard.Signer) *agent {
	p := guard.Principal{TenantID: "bench-tenant-" + strconv.Itoa(id%cfg.tenants), SubjectID: "agent-" + strconv.Itoa(id)}
	tok, _ := signer.Sign(guard.NewGrant(p, guard.Proposal{Name: "create_refund_draft", Arguments: writeArgs}, "toolbench", time.Now(), 24*time.Hour))
	return &agent{id: id, cfg: cfg, p: p, grant: tok, rng: rand.New(rand.NewPCG(uint64(id), 7))}
}

func (a *agent) next(i int) (guard.Call, guard.Code) {
	c := guard.Call{Principal: a.p, Context: guard.ExecutionContext{Provider: "openai", APIFamily: "responses",
		ResponseID: "resp_bench", CallID: "call_" + strconv.Itoa(i), AdapterRevision: "openai-responses-v1"}}
	roll := a.rng.IntN(100)
	switch {
	case roll < a.cfg.reads:
		c.Proposal = guard.Proposal{Name: "get_order", Arguments: readArgs}
	case roll < a.cfg.reads+a.cfg.writes || len(a.written) == 0:
		key := "key_" + strconv.Itoa(i)
		if len(a.written) < maxWritten {
			a.written = append(a.written, key)
		} else {
			a.written[i%maxWritten] = key
		}
		c.Proposal = guard.Proposal{Name: "create_refund_draft", Arguments: writeArgs}
		c.Context.IdempotencyKey, c.Approval = key, a.grant
	default:
		c.Proposal = guard.Proposal{Name: "create_refund_draft", Arguments: writeArgs}
		c.Context.IdempotencyKey, c.Approval = a.written[a.rng.IntN(len(a.written))], a.grant
	}
	return c, guard.CodeOK
}

type draft struct {
	DraftID  string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
	Reason   string `json:"reason"`
}

// benchTools have the conformance tools' shapes and do no downstream work,
// so the run measures the guard and the store.
func benchTools() *toolset.Set {
	get := toolset.Read("get_order", "Look up an order.", func(_ context.Context, _ *guard.Invocation, in orders.GetOrderInput) (orders.OrderView, error) {
		return orders.OrderView{OrderRef: in.OrderRef, Status: "paid"}, nil
	}, nil)

	var drafts atomic.Int64
	refund := toolset.Write("create_refund_draft", "Draft a refund.", func(_ context.Context, _ *guard.Invocation, in orders.RefundInput) (draft, error) {
		return draft{DraftID: "DRAFT-" + strconv.FormatInt(drafts.Add(1), 10), OrderRef: in.OrderRef, Reason: in.Reason}, nil
	}, &toolset.Options[orders.RefundInput, draft]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"}})
	return toolset.MustNew(get, refund)
}

var floorScript = redis.NewScript("return 1")

// floor issues rounds raw EVALSHA round trips from c workers on the
// client's pool.
func floor(ctx context.Context, rdb redis.UniversalClient, c int, rounds int64) (time.Duration, error) {
	if err := floorScript.Load(ctx, rdb).Err(); err != nil {
		return 0, err
	}
	var next atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for a := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the keys like the tenants' hash tags, for a cluster.
			key := "{bench-tenant-" + strconv.Itoa(a) + "}:floor"
			for next.Add(1) <= rounds {
				if err := floorScript.EvalSha(ctx, rdb, []string{key}).Err(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return time.Since(start), nil
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// cleanup deletes the run's keys.
func cleanup(ctx context.Context, rdb redis.UniversalClient, prefix string) {
	_ = redisconn.DeletePrefix(ctx, rdb, prefix)
	for a := 0; a < 4096; a++ {
		rdb.Del(ctx, "{bench-tenant-"+strconv.Itoa(a)+"}:floor")
	}
}

func formatCodes(m map[guard.Code]int) string {
	var parts []string
	for _, c := range guard.Codes() {
		if m[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
		}
	}
	return strings.Join(parts, ", ")
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// cost is CPU spent so far, or over a run: this process's, the Redis
// masters', and the masters' time inside scripts.
type cost struct{ client, redis, scripts time.Duration }

func measure(ctx context.Context, rdb redis.UniversalClient) cost {
	return cost{processCPU(), redisconn.ServerCPU(ctx, rdb), redisconn.ScriptTime(ctx, rdb)}
}

// since is the cost from start to c.
func (c cost) since(start cost) cost {
	return cost{c.client - start.client, c.redis - start.redis, c.scripts - start.scripts}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
