package idem_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestReshardWhileWriting: a cluster of the test's own (3 masters, each
// with a replica) moves 1000 slots from one master to another with
// `redis-cli --cluster reshard` while 16 writers dispatch writes of many
// tenants; then the slots move back, with Options.Replicas unset. Every
// write acknowledged during the move replays its result, none is answered
// UNAVAILABLE (a moving slot is retried within the write's 2 s deadline),
// any other one recovers by the contract; nothing runs twice and every
// tenant's chain verifies.
func TestReshardWhileWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	redistest.NeedBinaries(t, "redis-server", "redis-cli")
	const nodes = 6
	var addrs []string
	for i := range nodes {
		port := portCluster + i
		redistest.StartServer(t, t.TempDir(), port, "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "15000", "--repl-diskless-sync-delay", "0")
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := redistest.CreateCluster(ctx, 1, addrs...); err != nil {
		t.Fatalf("cluster create: %v\n%s", err, out)
	}
	ids := make([]string, 3) // redis-cli makes the first three masters
	for i := range nodes {
		waitClusterOK(t, portCluster+i)
		if i < 3 {
			c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addrs[i]})
			ids[i] = c.ClusterMyID(ctx).Val()
			_ = c.Close()
		}
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs[:3], MaxRedirects: 16,
		MaxRetries: 10, MinRetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })

	for _, tc := range []struct {
		replicas, from, to int
	}{{1, 0, 1}, {0, 1, 0}} {
		t.Run(fmt.Sprintf("Replicas=%d", tc.replicas), func(t *testing.T) {
			// Each phase has its own bound: one shared by both ran out on
			// a loaded machine and made the second phase's replays fail.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Replicas: tc.replicas, ReplicaTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !redistest.WaitUntil(20*time.Second, func() bool { return s.Check(ctx) == nil }) {
				t.Fatalf("Check: %v", s.Check(ctx))
			}
			// Every write is charged against its tenant's budget: the
			// charge is taken in the reservation's script, and so waits out
			// the moving slot with it.
			r := newRig(t, s)
			r.budget = guard.TenantBudget{Limit: reshardBudget, Period: budgetPeriod}
			r.use(s)
			reshardWhileWriting(t, ctx, r, addrs[0], ids[tc.from], ids[tc.to])
		})
	}
}

// reshardDeadline is each write's deadline during a reshard.
const reshardDeadline = 2 * time.Second

// reshardBudget is each tenant's budget during a reshard: more than its
// writes, so that none is refused.
const reshardBudget = 1 << 20

// reshardWhileWriting moves 1000 slots from one master to another while
// 16 writers run, each write with a 2 s deadline, then checks every write.
func reshardWhileWriting(t *testing.T, ctx context.Context, r *rig, seed, from, to string) {
	const writers, tenantsPerWriter, minWrites = 16, 16, 8
	rdb := r.Store.(*idem.Store).Client().(*redis.ClusterClient)
	masters := func(tenants []string) map[string]string {
		out := map[string]string{}
		for _, tn := range tenants {
			stream, _ := r.Store.(*idem.Store).AuditKeys(tn)
			m, err := rdb.MasterForKey(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			out[tn] = m.Options().Addr
		}
		return out
	}
	var allTenants []string
	for w := range writers {
		for tn := range tenantsPerWriter {
			allTenants = append(allTenants, fmt.Sprintf("rs-%s-%d-%d", from[:4], w, tn))
		}
	}
	before := masters(allTenants)
	done := make(chan struct{})
	var reshardOut []byte
	var reshardErr error
	go func() {
		defer close(done)
		reshardOut, reshardErr = redistest.Reshard(ctx, seed, from, to, 1000)
	}()
	type sent struct {
		o   op
		res *guard.Result
	}
	var (
		mu      sync.Mutex
		all     []sent
		tenants []string
		moving  atomic.Bool
	)
	moving.Store(true)
	var wg sync.WaitGroup
	for w := range writers {
		for tn := range tenantsPerWriter {
			tenants = append(tenants, fmt.Sprintf("rs-%s-%d-%d", from[:4], w, tn))
		}
		wg.Go(func() {
			for i := 0; moving.Load() || i < minWrites; i++ {
				p := guardtest.Principal(fmt.Sprintf("rs-%s-%d-%d", from[:4], w, i%tenantsPerWriter), "u")
				o := op{p: p, callID: fmt.Sprintf("w%d-%d", w, i), key: fmt.Sprintf("%s-w%d-%d", p.TenantID, w, i)}
				res := r.dispatchAll(t, []op{o}, reshardDeadline)[0]
				mu.Lock()
				all = append(all, sent{o, res})
				mu.Unlock()
			}
		})
	}
	<-done
	moving.Store(false)
	wg.Wait()
	if reshardErr != nil {
		t.Fatalf("reshard: %v\n%s", reshardErr, reshardOut)
	}

	first, later := map[string]int{}, map[string]int{}
	list := make([]op, 0, len(all))
	for _, x := range all {
		list = append(list, x.o)
		first[x.res.Code.String()+"/"+string(x.res.Delivery)]++
		if x.res.Code == guard.CodeOK && x.res.Delivery == guard.DeliveryFresh {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			again := r.dispatch(t, rctx, x.o)
			cancel()
			if again.Code != guard.CodeOK || again.Delivery != guard.DeliveryLocalReplay || string(again.Data) != string(x.res.Data) {
				t.Errorf("%s acknowledged during the move, then %s; want its result replayed", x.o.callID, again)
			}
			continue
		}
		res, path := r.recover(t, x.o)
		if res.Code != guard.CodeOK {
			t.Errorf("%s: %s after %s", x.o.callID, res, path)
		}
		later[path]++
	}
	// A moving slot is retried within the caller's deadline: no write is
	// told UNAVAILABLE for it.
	if n := first["UNAVAILABLE/fresh"]; n != 0 {
		t.Errorf("%d of %d writes answered UNAVAILABLE during the move, with a %v deadline; want 0", n, len(all), reshardDeadline)
	}
	never, once, again := r.led.tally(t, list)
	if never != 0 || again != 0 {
		t.Errorf("%d writes: %d never ran, %d ran more than once; want each once", len(list), never, again)
	}
	verifyAll(t, r.Store, tenants...)
	// Every execution charged once: the charges kept in each tenant's
	// budget are its writes that ran.
	ran := map[string]int64{}
	for _, o := range list {
		runs, _ := r.led.count(o)
		ran[o.p.TenantID] += int64(runs)
	}
	for _, tn := range tenants {
		if kept := spentOf(t, r.Store.(guard.Budgeter), tn, reshardBudget, r.Now()); kept != ran[tn] {
			t.Errorf("tenant %s: %d executions, %d charges kept", tn, ran[tn], kept)
		}
	}
	rdb.ReloadState(ctx)
	moved := 0
	for tn, addr := range masters(allTenants) {
		if before[tn] != addr {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no tenant's slot moved: the load did not meet the reshard")
	}
	t.Logf("1000 slots moved while %d writers ran %d writes over %d tenants (%d of whose slots moved), each charged to its tenant's budget: "+
		"first answers %v; recovered %v; %d ran once; charges kept = executions in every tenant",
		writers, len(list), len(tenants), moved, first, later, once)
}
