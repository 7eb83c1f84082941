// Command toolbench is a load generator for the guard: many concurrent
// agents dispatch a mix of reads, fresh writes and replays against a Redis
// server or cluster, and the same number of script calls is then issued
// without the guard, as raw no-op scripts each in its own round trip, on
// the same connection pool: the floor Redis sets for calls sent one by one.
//
//	go run ./cmd/toolbench -redis redis://127.0.0.1:6379/0 -c 64 -n 100000
//
// It prints throughput, latency percentiles, Redis round trips per dispatch,
// Go heap and Redis memory per stored dispatch, and last the line
//
//	guard/floor = X.XX
//
// the guard's wall time per dispatch over the floor's wall time per dispatch
// for the same number of script calls: 1.00 would mean the guard costs
// nothing beyond its calls sent one by one. The store pipelines concurrent
// calls (idem's auto-pipelining), so under load the guard's round trips
// are fewer than its calls, and it can go below the floor.
//
// With -peer the same workload (its mix, concurrency, pool and server) also
// runs through peer, the Powertools-style idempotency layer a team would
// write by hand instead (peer.go), and the guard's, the peer's and the
// floor's runs take turns in rounds of batches (-rounds), so that the
// machine's noise falls on all three alike. A table then gives each run's
// mix, round trips, time, p50/p99, client and Redis CPU per dispatch and
// Redis bytes per stored dispatch, and the last line is
//
//	guard/peer = X.XX
//
// the guard's wall time per dispatch over the peer's. The table also
// splits the guard's dispatches: how long its store calls took (Finish,
// Reserve, Commit: the batcher's queue, the round trip and the script),
// and the rest of each dispatch, outside the store.
//
// With -rtt D1,D2,… the three runs go through a loopback proxy that delays
// each direction by D (redistest.Proxy.Delay: a round trip costs 2·D more,
// a pipeline one round trip), once per D and per -c (a comma-separated
// list), and a table of every run closes the output:
//
//	go run ./cmd/toolbench -redis redis://127.0.0.1:6379/0 -c 8,64 -n 20000 -rtt 0,250us,1ms
//
// With -budget the guard has a tenant budget it never spends, so that
// every execution is charged (guard.Budgeter): a write's charge rides on
// its reservation, a read's takes a step of its own before the read runs.
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
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/pgopen"
	"github.com/toolguard/toolguard/internal/redisconn"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolbench:", err)
		os.Exit(2)
	}
}

type config struct {
	addr          string
	store         string // -store: a postgres:// URL (postgres.go)
	c, n          int
	cs            []int           // -c: each a run
	rtts          []time.Duration // -rtt: each a run through a delaying proxy
	rtt           bool            // -rtt given
	reads, writes int             // percentages; the rest are replays
	tenants       int
	pool          int
	keepKeys      bool
	cpuProfile    string
	prefix        string
	peer          bool
	peerReads     bool
	rounds        int
	budget        bool
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("toolbench", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.addr, "redis", "redis://127.0.0.1:6379/0", "a redis:// URL, or a comma-separated host:port list for a cluster; with -store, the Redis store runs beside when it is given")
	fs.StringVar(&cfg.store, "store", "", "a postgres:// URL: the guard on the Postgres store, with a transactional write, against a Stripe-style peer with -peer (postgres.go)")
	cList := fs.String("c", "64", "concurrent agents; a comma-separated list runs each in turn")
	rttList := fs.String("rtt", "", "a comma-separated list of delays D (0,250us,1ms): for each, the guard, the peer and the floor run through a loopback proxy that delays each direction by D (a round trip 2·D more); implies -peer, and a table of all runs closes the output")
	fs.IntVar(&cfg.n, "n", 100000, "dispatches in all (with -peer: each for the guard and the peer)")
	fs.IntVar(&cfg.reads, "reads", 50, "percent of dispatches that are reads")
	fs.IntVar(&cfg.writes, "writes", 30, "percent that are fresh writes (the rest replay an earlier write)")
	fs.IntVar(&cfg.tenants, "tenants", 16, "tenants the agents act for (spread over cluster slots)")
	fs.IntVar(&cfg.pool, "pool", 0, "Redis connection pool size (default: go-redis's, 10 per CPU)")
	fs.BoolVar(&cfg.keepKeys, "keep", false, "keep the run's keys in Redis afterwards")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file; samples carry the label phase=guard, peer or floor (go tool pprof -tagfocus phase=guard)")
	fs.BoolVar(&cfg.peer, "peer", false, "run the same workload through a hand-written Powertools-style idempotency layer too (peer.go), and print guard/peer")
	fs.BoolVar(&cfg.peerReads, "peer-reads", true, "the peer wraps reads too, keyed by call id; false: its reads make no round trip")
	fs.IntVar(&cfg.rounds, "rounds", 0, "interleave the guard's, the peer's and the floor's runs in this many rounds of batches (default 10 with -peer, 1 without)")
	fs.BoolVar(&cfg.budget, "budget", false, "give the guard a tenant budget (never spent): every execution is charged")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, f := range strings.Split(*cList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-c %q: %v", *cList, err)
		}
		cfg.cs = append(cfg.cs, c)
	}
	if *rttList != "" {
		cfg.rtt, cfg.peer = true, true
		for _, f := range strings.Split(*rttList, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d < 0 {
				return fmt.Errorf("-rtt %q: want delays such as 0,250us,1ms", *rttList)
			}
			cfg.rtts = append(cfg.rtts, d)
		}
	}
	if cfg.rounds == 0 {
		cfg.rounds = 1
		if cfg.peer {
			cfg.rounds = 10
		}
	}
	for _, c := range cfg.cs {
		if c < 1 || cfg.n < c || cfg.reads < 0 || cfg.writes < 0 || cfg.reads+cfg.writes > 100 || cfg.tenants < 1 || cfg.rounds < 1 || cfg.rounds > cfg.n {
			return errors.New("need -c >= 1, -n >= -c, 0 <= -reads + -writes <= 100, -tenants >= 1, 1 <= -rounds <= -n")
		}
	}
	if cfg.rtt && !strings.Contains(cfg.addr, "://") && cfg.store == "" {
		return errors.New("-rtt needs a standalone server's redis:// URL")
	}
	if cfg.store != "" {
		if !pgopen.Is(cfg.store) {
			return fmt.Errorf("-store %q: a postgres:// URL (Redis is -redis)", cfg.store)
		}
		if cfg.cpuProfile != "" {
			return errors.New("-store postgres://… takes no -cpuprofile")
		}
		beside := ""
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "redis" {
				beside = cfg.addr
			}
		})
		return benchPostgres(cfg, beside, w)
	}
	if len(cfg.cs) == 1 && !cfg.rtt {
		cfg.c = cfg.cs[0]
		_, err := bench(cfg, w)
		return err
	}
	return sweep(cfg, w)
}

// bench runs the workload once, at cfg.c agents against cfg.addr, prints
// what it measured and returns its phases.
func bench(cfg config, w io.Writer) (*outcome, error) {
	rdb, err := redisconn.Open(cfg.addr, cfg.pool)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	rt := &redisconn.RoundTrips{}
	rdb.AddHook(rt)
	// A short prefix, as a production deployment's ("tg:"), so bytes per
	// stored dispatch are not a long bench prefix's; unique per run.
	cfg.prefix = "tb" + strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36), 36) + ":"
	store, err := idem.New(rdb, idem.Options{Prefix: cfg.prefix, TTL: time.Hour})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	signer, _ := guard.NewSigner([]byte("toolbench-approval-key-0123456789abcdef"))
	gph, pph, fph := newPhase("guard", cfg), newPhase("peer", cfg), newPhase("floor", cfg)
	gopts := guard.Options{Signer: signer}
	if cfg.budget {
		gopts.TenantBudget = guard.TenantBudget{Limit: 1 << 62}
	}
	g := guard.New(orders.NoopTools(), &timedStore{Store: store, ph: gph}, gopts)
	// The peer keeps its keys in a database of its own on a standalone
	// server: Redis grows each database's key table as keys are added, and
	// that growth, charged to whichever run's batch crosses a size, belongs
	// to the run whose keys caused it. (A cluster has one database.)
	peerRdb := rdb
	if c, ok := rdb.(*redis.Client); ok && cfg.peer {
		opt := *c.Options()
		opt.DB ^= 1
		pc := redis.NewClient(&opt)
		defer pc.Close()
		pc.AddHook(rt)
		peerRdb = pc
	}
	pr := &peer{rdb: peerRdb, prefix: cfg.prefix + "peer:", lease: time.Minute, ttl: time.Hour, reads: cfg.peerReads, tools: map[string]peerTool{
		"get_order": typed(orders.NoopGetOrder), "create_refund_draft": typed(orders.NoopCreateDraft)}}
	if err := floorScript.Load(ctx, rdb).Err(); err != nil {
		return nil, err
	}

	// Everything the run keeps is allocated before the heap is measured:
	// fixed-size latency histograms and bounded key lists per agent, the
	// peer's agents with the same seeds as the guard's, so the same mix.
	agents, peerAgents := make([]*agent, cfg.c), make([]*agent, cfg.c)
	for a := range agents {
		agents[a], peerAgents[a] = newAgent(a, cfg, signer), newAgent(a, cfg, signer)
	}
	codes := make([]map[guard.Code]int, cfg.c)
	for a := range codes {
		codes[a] = map[guard.Code]int{}
	}
	// Fill the connection pool first: its buffers are not the guard's growth.
	var warm sync.WaitGroup
	for range cfg.c {
		warm.Go(func() {
			for range 10 {
				rdb.Ping(ctx)
				if peerRdb != rdb {
					peerRdb.Ping(ctx)
				}
			}
		})
	}
	warm.Wait()
	memBefore := redisconn.UsedMemory(ctx, rdb)
	heapBefore := heapInUse()
	fmt.Fprintf(w, "toolbench: %d dispatches, %d agents, %d%% reads, %d%% writes, %d%% replays, %d tenants\n",
		cfg.n, cfg.c, cfg.reads, cfg.writes, 100-cfg.reads-cfg.writes, cfg.tenants)
	if cfg.peer {
		fmt.Fprintf(w, "with -peer: the guard, the peer and the floor in %d interleaved rounds; the peer wraps reads: %v\n", cfg.rounds, cfg.peerReads)
	}

	agentCtx := make([]context.Context, cfg.c)
	for a := range agentCtx {
		agentCtx[a] = context.WithValue(ctx, agentKey{}, a)
	}
	guardDo := func(a, i int) {
		call, k := agents[a].next(i)
		t0 := time.Now()
		res, err := g.Dispatch(agentCtx[a], call)
		d := time.Since(t0)
		gph.done(a, k, d, err != nil || res.Code != guard.CodeOK)
		gph.outside[a][k].add(d - gph.inStore[a])
		gph.inStore[a] = 0
		if res != nil {
			codes[a][res.Code]++
		}
	}
	peerDo := func(a, i int) {
		call, k := peerAgents[a].next(i)
		t0 := time.Now()
		_, replayed, err := pr.Dispatch(ctx, call)
		pph.done(a, k, time.Since(t0), err != nil || replayed != (k == kindReplay))
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	for r := range cfg.rounds {
		lo, hi := r*cfg.n/cfg.rounds, (r+1)*cfg.n/cfg.rounds
		guardBatch := func() error {
			return gph.add(ctx, rdb, rt, func() (time.Duration, error) { return dispatch(cfg.c, lo, hi, guardDo), nil })
		}
		peerBatch := func() error {
			return pph.add(ctx, rdb, rt, func() (time.Duration, error) { return dispatch(cfg.c, lo, hi, peerDo), nil })
		}
		// Take turns going first, so neither run always follows the other.
		batches := []func() error{guardBatch}
		if cfg.peer {
			batches = append(batches, peerBatch)
			if r%2 == 1 {
				batches[0], batches[1] = peerBatch, guardBatch
			}
		}
		for _, b := range batches {
			if err := b(); err != nil {
				return nil, err
			}
		}
		// The floor: this round's guard script calls, each alone, no guard.
		trips := gph.lastCommands
		if err := fph.add(ctx, rdb, rt, func() (time.Duration, error) { return floor(ctx, rdb, cfg.c, trips) }); err != nil {
			return nil, err
		}
	}
	if cfg.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	heapAfter := heapInUse()
	memAfter := redisconn.UsedMemory(ctx, rdb)
	if !cfg.keepKeys {
		cleanup(ctx, rdb, cfg.prefix)
		if peerRdb != rdb {
			_ = redisconn.DeletePrefix(ctx, peerRdb, cfg.prefix)
		}
	}

	all := map[guard.Code]int{}
	for _, m := range codes {
		for c, k := range m {
			all[c] += k
		}
	}
	lat := gph.latency()
	guardTime, floorTime, roundTrips, calls := gph.time, fph.time, gph.roundTrips, gph.commands
	guardCost, floorCost := gph.cost, fph.cost
	per := func(d time.Duration) time.Duration { return d / time.Duration(cfg.n) }
	fmt.Fprintf(w, "results:     %s\n", formatCodes(all))
	if f := gph.failures.Load(); f > 0 {
		fmt.Fprintf(w, "unexpected:  %d dispatches did not get the expected code\n", f)
	}
	if f := pph.failures.Load(); f > 0 {
		fmt.Fprintf(w, "unexpected:  %d of the peer's dispatches failed or replayed when they should not have\n", f)
	}
	fmt.Fprintf(w, "throughput:  %.0f dispatches/s (%v in all)\n", float64(cfg.n)/guardTime.Seconds(), guardTime.Round(time.Millisecond))
	fmt.Fprintf(w, "latency:     p50 %v  p99 %v  p999 %v  max %v\n", lat.quantile(0.50), lat.quantile(0.99), lat.quantile(0.999), lat.max)
	fmt.Fprintf(w, "round trips: %.3f per dispatch (%d in all; %.3f script calls per dispatch, several to a round trip when pipelined)\n",
		float64(roundTrips)/float64(cfg.n), roundTrips, float64(calls)/float64(cfg.n))
	fmt.Fprintf(w, "floor:       %d raw EVALSHA calls, one per round trip, in %v, %.0f/s\n", calls, floorTime.Round(time.Millisecond), float64(calls)/floorTime.Seconds())
	fmt.Fprintf(w, "go heap:     %.1f MiB in use before, %.1f MiB after (after GC)\n", mib(heapBefore), mib(heapAfter))
	if memBefore > 0 && memAfter > 0 {
		fmt.Fprintf(w, "redis:       used_memory +%.1f MiB, %.0f bytes per stored dispatch (records, bindings, audit)\n",
			mib(uint64(max(guardCost.mem, 0))), float64(guardCost.mem)/float64(gph.stored()))
	}
	_, cluster := rdb.(*redis.ClusterClient)
	for _, run := range []struct {
		name string
		c    cost
	}{{"guard", guardCost}, {"floor", floorCost}} {
		fmt.Fprintf(w, "cpu, %s:  client %v, redis %v (of which scripts %v) per dispatch\n",
			run.name, per(run.c.client), per(run.c.redis), per(run.c.scripts))
	}
	fmt.Fprintf(w, "per dispatch: guard %v, floor %v for the same script calls\n", per(guardTime), per(floorTime))
	if guardCost.redis > 0 && !cluster {
		// One Redis thread serves every dispatch, so the guard's run can be
		// no faster than Redis's CPU per dispatch.
		fmt.Fprintf(w, "redis bound:  guard/floor >= %.2f (Redis CPU per dispatch over floor time per dispatch)\n",
			float64(guardCost.redis)/float64(floorTime))
	}
	if cfg.peer {
		fmt.Fprintln(w)
		printPhases(w, cfg.n, gph, pph, fph)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "guard/floor = %.2f\n", float64(guardTime)/float64(floorTime))
	if cfg.peer {
		fmt.Fprintf(w, "guard/peer = %.2f\n", float64(guardTime)/float64(pph.time))
	}
	return &outcome{c: cfg.c, guard: gph, peer: pph, floor: fph}, nil
}

// kind is what a dispatch of the workload is.
type kind int

const (
	kindRead   kind = iota // a read: no idempotency key
	kindWrite              // a fresh write: a new key
	kindReplay             // an earlier write again: its key, a new call id
	nKinds
)

var kindNames = [nKinds]string{"read", "write", "replay"}

// phase adds up one run (the guard's, the peer's or the floor's) over its
// batches. Rounds interleave the runs, so that the machine's noise falls on
// each alike.
type phase struct {
	name      string
	peerReads bool // the peer's run: it stores reads too
	// Per agent, so that agents count without sharing: latencies and
	// dispatches of each kind.
	hists  [][nKinds]histogram
	counts [][nKinds]int64
	// The guard's run: per agent, its store calls' latencies, and per
	// kind the rest of each dispatch (the guard's own work and waiting
	// for the CPU); inStore adds up the current dispatch's store calls.
	store   [][nOps]histogram
	outside [][nKinds]histogram
	inStore []time.Duration

	failures     atomic.Int64
	time         time.Duration
	cost         cost
	roundTrips   int64
	commands     int64 // script calls and commands: a pipeline counts its commands
	lastCommands int64 // the latest batch's
}

func newPhase(name string, cfg config) *phase {
	ph := &phase{name: name, peerReads: cfg.peerReads, hists: make([][nKinds]histogram, cfg.c), counts: make([][nKinds]int64, cfg.c)}
	if name == "guard" {
		ph.store, ph.outside, ph.inStore = make([][nOps]histogram, cfg.c), make([][nKinds]histogram, cfg.c), make([]time.Duration, cfg.c)
	}
	return ph
}

// The store calls of a guarded dispatch: a read's Finish, a write's
// Reserve and Commit (a replay is a Reserve answered from the store).
const (
	opFinish = iota
	opReserve
	opCommit
	nOps
)

var opNames = [nOps]string{"finish", "reserve", "commit"}

// agentKey is the context key of the agent a guarded dispatch is for, so
// that timedStore counts its store calls in that agent's histograms.
type agentKey struct{}

// timedStore times the store calls the guard makes, per agent: how long a
// dispatch waits for Redis (the batcher's queue, the round trip, the
// script) as against its own work.
type timedStore struct {
	*idem.Store
	ph *phase
}

func (s *timedStore) time(ctx context.Context, op int, t0 time.Time) {
	if a, ok := ctx.Value(agentKey{}).(int); ok {
		d := time.Since(t0)
		s.ph.store[a][op].add(d)
		s.ph.inStore[a] += d
	}
}

// Finish implements guard.Store, timed.
func (s *timedStore) Finish(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	defer s.time(ctx, opFinish, time.Now())
	return s.Store.Finish(ctx, e)
}

// Reserve implements guard.Store, timed.
func (s *timedStore) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	defer s.time(ctx, opReserve, time.Now())
	return s.Store.Reserve(ctx, e, lease)
}

// Commit implements guard.Store, timed.
func (s *timedStore) Commit(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	defer s.time(ctx, opCommit, time.Now())
	return s.Store.Commit(ctx, e)
}

// storeLatency merges the agents' latencies of store call op.
func (ph *phase) storeLatency(op int) *histogram {
	var h histogram
	for a := range ph.store {
		h.merge(&ph.store[a][op])
	}
	return &h
}

// outsideLatency merges the agents' time outside the store, for a kind.
func (ph *phase) outsideLatency(k kind) *histogram {
	var h histogram
	for a := range ph.outside {
		h.merge(&ph.outside[a][k])
	}
	return &h
}

// done records agent a's dispatch of kind k.
func (ph *phase) done(a int, k kind, d time.Duration, failed bool) {
	ph.hists[a][k].add(d)
	ph.counts[a][k]++
	if failed {
		ph.failures.Add(1)
	}
}

// add runs one batch, work, and adds its wall time, its cost and its round
// trips to ph's. Its samples in a CPU profile carry the label phase=name.
func (ph *phase) add(ctx context.Context, rdb redis.UniversalClient, rt *redisconn.RoundTrips, work func() (time.Duration, error)) error {
	// INFO is a round trip too: read before counting starts, and after it ends.
	before := measure(ctx, rdb)
	rt.Reset()
	var d time.Duration
	var err error
	pprof.Do(ctx, pprof.Labels("phase", ph.name), func(context.Context) { d, err = work() })
	ph.roundTrips += rt.Count()
	ph.lastCommands = rt.Commands()
	ph.commands += ph.lastCommands
	ph.cost = ph.cost.plus(measure(ctx, rdb).since(before))
	ph.time += d
	return err
}

// kinds returns the dispatches of each kind over all agents.
func (ph *phase) kinds() (n [nKinds]int64) {
	for _, c := range ph.counts {
		for k := range c {
			n[k] += c[k]
		}
	}
	return n
}

// stored is the number of dispatches that left something in Redis: every
// guarded dispatch binds its call id and appends an audit record; of the
// peer's, fresh writes store a record, and reads when it wraps them.
func (ph *phase) stored() int64 {
	n := ph.kinds()
	if ph.name == "peer" && ph.peerReads {
		return n[kindRead] + n[kindWrite]
	} else if ph.name == "peer" {
		return n[kindWrite]
	}
	return n[kindRead] + n[kindWrite] + n[kindReplay]
}

// latency merges the latencies of the kinds named, or of all.
func (ph *phase) latency(kinds ...kind) *histogram {
	if len(kinds) == 0 {
		kinds = []kind{kindRead, kindWrite, kindReplay}
	}
	var h histogram
	for a := range ph.hists {
		for _, k := range kinds {
			h.merge(&ph.hists[a][k])
		}
	}
	return &h
}

// dispatch runs dispatches lo..hi-1 on c goroutines, agent a running each
// dispatch i it takes as do(a, i), and returns the wall time.
func dispatch(c, lo, hi int, do func(a, i int)) time.Duration {
	var next atomic.Int64
	next.Store(int64(lo))
	start := time.Now()
	var wg sync.WaitGroup
	for a := range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= hi {
					return
				}
				do(a, i)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// printPhases prints the guard's, the peer's and the floor's runs side by
// side, per guarded dispatch (the floor's over the guard's n: it ran the
// guard's round trips).
func printPhases(w io.Writer, n int, gph, pph, fph *phase) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	per := func(d time.Duration) string { return short(d / time.Duration(n)) }
	row := func(label string, g, p, f string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", label, g, p, f) }
	gk, pk := gph.kinds(), pph.kinds()
	row("", "guard", "peer", "floor")
	for k := range nKinds {
		row(kindNames[k]+"s", strconv.FormatInt(gk[k], 10), strconv.FormatInt(pk[k], 10), "-")
	}
	row("round trips", strconv.FormatInt(gph.roundTrips, 10), strconv.FormatInt(pph.roundTrips, 10), strconv.FormatInt(fph.roundTrips, 10))
	perRT := func(ph *phase) string { return fmt.Sprintf("%.3f", float64(ph.roundTrips)/float64(n)) }
	row("calls", strconv.FormatInt(gph.commands, 10), strconv.FormatInt(pph.commands, 10), strconv.FormatInt(fph.commands, 10))
	row("round trips per dispatch", perRT(gph), perRT(pph), perRT(fph))
	row("time per dispatch", per(gph.time), per(pph.time), per(fph.time))
	q := func(h *histogram) string { return short(h.quantile(0.50)) + "/" + short(h.quantile(0.99)) }
	row("p50/p99", q(gph.latency()), q(pph.latency()), "-")
	for k := range nKinds {
		row("p50/p99 "+kindNames[k], q(gph.latency(k)), q(pph.latency(k)), "-")
	}
	for op := range nOps {
		row("p50/p99 store "+opNames[op], q(gph.storeLatency(op)), "-", "-")
	}
	for k := range nKinds {
		row("p50/p99 "+kindNames[k]+" outside store", q(gph.outsideLatency(k)), "-", "-")
	}
	row("client cpu per dispatch", per(gph.cost.client), per(pph.cost.client), per(fph.cost.client))
	row("redis cpu per dispatch", per(gph.cost.redis), per(pph.cost.redis), per(fph.cost.redis))
	row("stored dispatches", strconv.FormatInt(gph.stored(), 10), strconv.FormatInt(pph.stored(), 10), "-")
	bytes := func(ph *phase) string {
		if ph.stored() == 0 || ph.cost.mem == 0 { // nothing stored, or INFO refused
			return "-"
		}
		return strconv.FormatInt(ph.cost.mem/ph.stored(), 10)
	}
	row("redis bytes per stored dispatch", bytes(gph), bytes(pph), "-")
	_ = tw.Flush()
}

// short rounds d to three significant digits.
func short(d time.Duration) string {
	r := time.Duration(1)
	for d >= 1000*r {
		r *= 10
	}
	return d.Round(r).String()
}

// agent makes one agent's calls: reads, fresh writes with new keys, each
// approved by a grant of its own (a grant pays for one execution), and
// replays of its earlier writes (a new call id, the same key, intent and
// grant).
type agent struct {
	id      int
	cfg     config
	p       guard.Principal
	signer  *guard.Signer
	rng     *rand.Rand
	written []written // the latest maxWritten writes, replayed at random
}

// written is a fresh write an agent may replay: its key and its grant.
type written struct{ key, grant string }

// maxWritten bounds an agent's replayable keys, so the run's memory does not
// grow with -n.
const maxWritten = 1024

func newAgent(id int, cfg config, signer *guard.Signer) *agent {
	p := guard.Principal{TenantID: "bench-tenant-" + strconv.Itoa(id%cfg.tenants), SubjectID: "agent-" + strconv.Itoa(id)}
	return &agent{id: id, cfg: cfg, p: p, signer: signer, rng: rand.New(rand.NewPCG(uint64(id), 7))}
}

func (a *agent) next(i int) (guard.Call, kind) {
	c := guard.Call{Principal: a.p, Context: guard.ExecutionContext{Provider: "openai", APIFamily: "responses",
		ResponseID: "resp_bench", CallID: "call_" + strconv.Itoa(i), AdapterRevision: "openai-responses-v1"}}
	roll := a.rng.IntN(100)
	switch {
	case roll < a.cfg.reads:
		c.Proposal = guard.Proposal{Name: "get_order", Arguments: orders.NoopReadArgs}
		return c, kindRead
	case roll < a.cfg.reads+a.cfg.writes || len(a.written) == 0:
		c.Proposal = guard.Proposal{Name: "create_refund_draft", Arguments: orders.NoopWriteArgs}
		tok, _ := a.signer.Sign(guard.NewGrant(a.p, c.Proposal, "toolbench", time.Now(), 24*time.Hour))
		w := written{key: "key_" + strconv.Itoa(i), grant: tok}
		if len(a.written) < maxWritten {
			a.written = append(a.written, w)
		} else {
			a.written[i%maxWritten] = w
		}
		c.Context.IdempotencyKey, c.Approval = w.key, w.grant
		return c, kindWrite
	default:
		c.Proposal = guard.Proposal{Name: "create_refund_draft", Arguments: orders.NoopWriteArgs}
		w := a.written[a.rng.IntN(len(a.written))]
		c.Context.IdempotencyKey, c.Approval = w.key, w.grant
		return c, kindReplay
	}
}

var floorScript = redis.NewScript("return 1")

// floor issues rounds raw EVALSHA round trips of floorScript, loaded
// before, from c workers on the client's pool.
func floor(ctx context.Context, rdb redis.UniversalClient, c int, rounds int64) (time.Duration, error) {
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
// masters', and the masters' time inside scripts; and the masters'
// used_memory, or its growth over a run (negative if Redis freed more than
// the run stored).
type cost struct {
	client, redis, scripts time.Duration
	mem                    int64
}

func measure(ctx context.Context, rdb redis.UniversalClient) cost {
	return cost{processCPU(), redisconn.ServerCPU(ctx, rdb), redisconn.ScriptTime(ctx, rdb), int64(redisconn.UsedMemory(ctx, rdb))}
}

// since is the cost from start to c.
func (c cost) since(start cost) cost {
	return cost{c.client - start.client, c.redis - start.redis, c.scripts - start.scripts, c.mem - start.mem}
}

// plus is the cost of two runs.
func (c cost) plus(o cost) cost {
	return cost{c.client + o.client, c.redis + o.redis, c.scripts + o.scripts, c.mem + o.mem}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
