package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
)

const (
	portEvicted        = 19070
	portEvictedCluster = 19080 // to 19082
	evictionAgents     = 64
	evictionTenants    = 20
)

// evictionRun is what happened to the writes of a load against a server
// whose policy is switched to evict.
type evictionRun struct {
	store *idem.Store
	rig   *rig
	logs  *syncBuffer
	meter *sdkmetric.ManualReader

	mu      sync.Mutex
	answers []evictionAnswer
}

type evictionAnswer struct {
	o          op
	code       guard.Code
	start, end time.Time
}

func newEvictionRun(t *testing.T, rdb redis.UniversalClient) *evictionRun {
	t.Helper()
	e := &evictionRun{logs: &syncBuffer{}, meter: sdkmetric.NewManualReader()}
	// An hour between periodic checks: whatever refuses the store in this
	// test is the eviction itself.
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), CheckEvery: time.Hour,
		Logger:        slog.New(slog.NewTextHandler(e.logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.meter))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.store, e.rig = s, newRig(t, s)
	return e
}

// value is a write's payload: big enough that a few megabytes fill up in a
// few thousand writes.
var evictionValue = strings.Repeat("v", 512)

func (e *evictionRun) write(t *testing.T, o op) guard.Code {
	c := o.call()
	c.Proposal.Arguments = []byte(`{"key":"` + o.key + `","value":"` + evictionValue + `"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := e.rig.Guard.Dispatch(ctx, c)
	if err != nil {
		t.Errorf("%s: host error %v", o.callID, err)
		return guard.CodeUnavailable
	}
	e.mu.Lock()
	e.answers = append(e.answers, evictionAnswer{o: o, code: res.Code, start: start, end: time.Now()})
	e.mu.Unlock()
	return res.Code
}

// load runs evictionAgents writers over evictionTenants tenants, each
// writing new operations until stop says so.
func (e *evictionRun) load(t *testing.T, phase string, stop func() bool) {
	var wg sync.WaitGroup
	for a := range evictionAgents {
		p := guardtest.Principal("ev-"+strconv.Itoa(a%evictionTenants), "u")
		wg.Go(func() {
			for i := 0; !stop(); i++ {
				tag := phase + strconv.Itoa(a) + "-" + strconv.Itoa(i)
				e.write(t, op{p: p, callID: tag, key: tag})
			}
		})
	}
	wg.Wait()
}

// audited returns the call ids of the OK fresh records each tenant's audit
// log still holds.
func (e *evictionRun) audited(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for tn := range evictionTenants {
		recs, _, err := e.store.Audit(context.Background(), "ev-"+strconv.Itoa(tn), 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var b guard.AuditBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatal(err)
			}
			if r.Code == guard.CodeOK && r.Delivery == guard.DeliveryFresh {
				out[b.Context.CallID] = true
			}
		}
	}
	return out
}

// evictedKeys is the servers' evicted-key count (INFO stats).
func evictedKeys(t *testing.T, rdb redis.UniversalClient) int64 {
	var n atomic.Int64
	err := redisconn.ForEachMaster(context.Background(), rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := redisconn.Info(ctx, c, "stats")
		if err != nil {
			return err
		}
		v, _ := strconv.ParseInt(info["evicted_keys"], 10, 64)
		n.Add(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n.Load()
}

// configSet sets a parameter on every master.
func configSet(t *testing.T, rdb redis.UniversalClient, name, value string) {
	t.Helper()
	err := redisconn.ForEachMaster(context.Background(), rdb, func(ctx context.Context, c *redis.Client) error {
		return c.ConfigSet(ctx, name, value).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fill writes plain keys of 1 KB, as another application sharing the
// server would, until its masters have evicted at least n keys. With ttl
// each key has one (a volatile policy evicts only those).
func fill(t *testing.T, rdb redis.UniversalClient, ttl bool, n int64) {
	t.Helper()
	ctx := context.Background()
	val := strings.Repeat("f", 1024)
	exp := time.Duration(0)
	if ttl {
		exp = time.Hour
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; evictedKeys(t, rdb) < n; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("Redis evicted fewer than %d keys within 30 s of filling", n)
		}
		pipe := rdb.Pipeline()
		for j := range 100 {
			pipe.Set(ctx, "filler:"+strconv.Itoa(i)+":"+strconv.Itoa(j), val, exp)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("filling: %v", err)
		}
	}
}

// evictionNoticed runs the load on a server that starts under noeviction
// and is switched to policy under it, with the store's periodic check an
// hour away; then another application's writes fill maxmemory and Redis
// evicts. Every write and replay that starts after the switch must be
// refused (UNAVAILABLE) and run nothing, so what the store acknowledges
// after the switch is at most the dispatches in flight at it (one per
// agent), and after the first evicted key nothing; the log and the metric
// say why (the policy, and the eviction); restoring noeviction lets writes
// run again after a check passes. With full, the switch comes once the
// load filled maxmemory and Redis refuses its writes (OOM), as an operator
// would switch to unblock a full server: Redis then evicts at its next
// command, whatever it is.
func evictionNoticed(t *testing.T, rdb redis.UniversalClient, policy string, full bool) {
	e := newEvictionRun(t, rdb)
	var (
		switched   atomic.Bool
		switchedAt time.Time
		refused    atomic.Int64
		filled     atomic.Bool
		done       = make(chan struct{})
		okBefore   atomic.Int64
		oomBefore  atomic.Int64 // UNAVAILABLE answers before the switch
	)
	go func() {
		defer close(done)
		defer filled.Store(true)
		for okBefore.Load() < 300 || full && oomBefore.Load() < 50 {
			time.Sleep(5 * time.Millisecond)
		}
		configSet(t, rdb, "maxmemory-policy", policy)
		switchedAt = time.Now()
		switched.Store(true)
		// The agents go on writing (refused) while another application
		// fills the server until it evicts.
		fill(t, rdb, strings.HasPrefix(policy, "volatile-"), 1)
		firstAt := time.Now()
		fill(t, rdb, strings.HasPrefix(policy, "volatile-"), 200)
		// The store hears of the eviction (its log says so) within a
		// moment.
		for !strings.Contains(e.logs.String(), "evicted a key") && time.Since(firstAt) < 10*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(90 * time.Second)
	e.load(t, "a", func() bool {
		if time.Now().After(deadline) {
			return true
		}
		e.mu.Lock()
		if n := len(e.answers); n > 0 {
			a := e.answers[n-1]
			switch {
			case !switched.Load() && a.code == guard.CodeOK:
				okBefore.Add(1)
			case !switched.Load() && a.code == guard.CodeUnavailable:
				oomBefore.Add(1)
			case switched.Load() && a.code == guard.CodeUnavailable:
				refused.Add(1)
			}
		}
		e.mu.Unlock()
		return filled.Load() && refused.Load() > 4*evictionAgents
	})
	<-done
	if t.Failed() {
		return
	}

	// What the store acknowledged after the switch, and what of it has no
	// audit record any more.
	audited := e.audited(t)
	var okAfter, lostAfter, startedAfter, lostBefore, okBeforeN int
	var acked []op
	for _, a := range e.answers {
		if a.code != guard.CodeOK {
			continue
		}
		acked = append(acked, a.o)
		if a.end.Before(switchedAt) {
			okBeforeN++
			if !audited[a.o.callID] {
				lostBefore++
			}
			continue
		}
		okAfter++
		if !audited[a.o.callID] {
			lostAfter++
		}
		if a.start.After(switchedAt) { // and so every write after the first eviction
			startedAfter++
		}
	}
	t.Logf("%s (full %v): %d writes acknowledged before the switch, %d of them without an audit record after the eviction; "+
		"%d acknowledged after it (in flight at the switch), %d of them without an audit record; %d started after the switch; %d refused; %d keys evicted",
		policy, full, okBeforeN, lostBefore, okAfter, lostAfter, startedAfter, refused.Load(), evictedKeys(t, rdb))
	if startedAfter != 0 {
		t.Errorf("%s: %d writes that started after the switch, which came before the first eviction, were acknowledged; want 0",
			policy, startedAfter)
	}
	if okAfter > evictionAgents || lostAfter > okAfter {
		t.Errorf("%s: %d writes acknowledged after the switch, %d without an audit record; want at most the %d in flight",
			policy, okAfter, lostAfter, evictionAgents)
	}
	if strings.HasPrefix(policy, "volatile-") && lostBefore+lostAfter != 0 {
		// Audit logs have no TTL: a volatile policy never evicts them.
		t.Errorf("%s: %d acknowledged writes lost their audit record, want 0", policy, lostBefore+lostAfter)
	}
	// The log and the metric say why: the eviction, and, when a
	// reservation saw the policy before Redis evicted, the policy. On a
	// full server Redis evicts at the first command after the switch, and
	// the store refuses from that event on: no reservation runs to see the
	// policy.
	wantLogs, reasons := []string{"evicted a key", "reason=evicted"}, []string{"evicted"}
	if !full {
		wantLogs = append(wantLogs, "maxmemory-policy allows eviction", "reason=eviction_policy")
		reasons = append(reasons, "eviction_policy")
	}
	logs := e.logs.String()
	for _, want := range wantLogs {
		if !strings.Contains(logs, want) {
			t.Errorf("%s: no log line says %q:\n%s", policy, want, logs)
		}
	}
	for _, reason := range reasons {
		if got := refusals(t, e.meter, reason); got < 1 {
			t.Errorf("%s: %s{reason=%s} = %d, want at least 1", policy, idem.MetricStoreRefusals, reason, got)
		}
	}

	// Replays of every acknowledged write, the server still evicting: each
	// refused, none runs again.
	before := map[string]int{}
	for _, o := range acked {
		before[o.key], _ = e.rig.led.count(o)
	}
	var again atomic.Int64
	var wg sync.WaitGroup
	for i := range evictionAgents {
		wg.Go(func() {
			for j := i; j < len(acked); j += evictionAgents {
				o := acked[j]
				if code := e.write(t, o); code != guard.CodeUnavailable {
					t.Errorf("%s: replay of %s answered %s, want UNAVAILABLE", policy, o.callID, code)
				}
				if runs, _ := e.rig.led.count(o); runs != before[o.key] {
					again.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if again.Load() != 0 {
		t.Errorf("%s: replaying %d acknowledged writes ran the tool again %d times, want 0", policy, len(acked), again.Load())
	}

	// Restored: writes run again once a check passes.
	configSet(t, rdb, "maxmemory-policy", "noeviction")
	configSet(t, rdb, "maxmemory", "0")
	ok := false
	for i := range 300 {
		o := op{p: alice, callID: "after-" + strconv.Itoa(i), key: "after-" + strconv.Itoa(i)}
		if e.write(t, o) == guard.CodeOK {
			ok = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ok {
		t.Errorf("%s: no write ran after noeviction was restored", policy)
	}
}

// TestEvictionNoticedAtFirstKey: an operator switches a running server to
// an evicting policy (CONFIG SET maxmemory-policy) under 64 agents of 20
// tenants writing at once, with maxmemory small enough that Redis evicts
// within seconds of another application's writes; the store's periodic
// check is an hour away. On a standalone server and on a cluster (every
// master switched), for allkeys-lru and volatile-lru, and on a server
// switched to allkeys-lru once the load filled it (full).
func TestEvictionNoticedAtFirstKey(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	if testing.Short() {
		t.Skip("a write load against servers of its own")
	}
	for _, c := range []struct {
		policy string
		full   bool
	}{{"allkeys-lru", false}, {"volatile-lru", false}, {"allkeys-lru", true}} {
		name := "server/" + c.policy
		if c.full {
			name += "/full"
		}
		t.Run(name, func(t *testing.T) {
			port := portEvicted
			startRedis(t, t.TempDir(), port, "--appendonly", "no", "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
			rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port), PoolSize: 2 * evictionAgents})
			t.Cleanup(func() { _ = rdb.Close() })
			evictionNoticed(t, rdb, c.policy, c.full)
		})
	}
	t.Run("cluster/allkeys-lru", func(t *testing.T) {
		redistest.NeedBinaries(t, "redis-cli")
		var addrs []string
		for i := range 3 {
			port := portEvictedCluster + i
			startRedis(t, t.TempDir(), port, "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
			addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := redistest.CreateCluster(ctx, 0, addrs...); err != nil {
			t.Fatalf("cluster create: %v\n%s", err, out)
		}
		for i := range 3 {
			waitClusterOK(t, portEvictedCluster+i)
		}
		rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs, PoolSize: 2 * evictionAgents})
		t.Cleanup(func() { _ = rdb.Close() })
		evictionNoticed(t, rdb, "allkeys-lru", false)
	})
}

// TestMaxmemoryLoweredUnderNoeviction: maxmemory lowered at run time under
// noeviction makes Redis refuse the store's writes (OOM): they are
// answered UNAVAILABLE and nothing of them runs, and every write
// acknowledged before is still there (a replay is answered from its
// record).
func TestMaxmemoryLoweredUnderNoeviction(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	startRedis(t, t.TempDir(), portEvicted+1, "--appendonly", "no", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portEvicted+1)})
	t.Cleanup(func() { _ = rdb.Close() })
	e := newEvictionRun(t, rdb)
	var n atomic.Int64
	e.load(t, "before", func() bool { return n.Add(1) > 400 })
	used, err := redisconn.Info(context.Background(), rdb, "memory")
	if err != nil {
		t.Fatal(err)
	}
	configSet(t, rdb, "maxmemory", used["used_memory"])
	var unavailable atomic.Int64
	var refused atomic.Int64
	e.load(t, "after", func() bool {
		e.mu.Lock()
		if a := e.answers[len(e.answers)-1]; a.code == guard.CodeUnavailable {
			refused.Add(1)
		}
		e.mu.Unlock()
		return refused.Load() >= 200 || n.Add(1) > 20000
	})
	var acked []op
	for _, a := range e.answers {
		switch a.code {
		case guard.CodeOK:
			acked = append(acked, a.o)
		case guard.CodeUnavailable:
			unavailable.Add(1)
			if runs, _ := e.rig.led.count(a.o); runs != 0 {
				t.Errorf("%s was answered UNAVAILABLE and ran %d times", a.o.callID, runs)
			}
		case guard.CodeOutcomeUnknown:
			// a write whose commit Redis refused after it ran: honest, and
			// not acknowledged
		default:
			t.Errorf("%s: %s", a.o.callID, a.code)
		}
	}
	if unavailable.Load() == 0 {
		t.Fatal("no write was refused after maxmemory was lowered")
	}
	// With room again, every acknowledged write is still there: a replay
	// is answered from its record (an answer appends an audit record, so
	// while Redis refuses writes a replay is UNAVAILABLE too).
	configSet(t, rdb, "maxmemory", "0")
	for _, o := range acked {
		before, _ := e.rig.led.count(o)
		c := o.call()
		c.Proposal.Arguments = []byte(`{"key":"` + o.key + `","value":"` + evictionValue + `"}`)
		res, err := e.rig.Guard.Dispatch(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
			t.Errorf("replay of acknowledged %s: %s %s, want OK local_replay", o.callID, res.Code, res.Delivery)
		}
		if after, _ := e.rig.led.count(o); after != before {
			t.Errorf("replay of acknowledged %s ran it again", o.callID)
		}
	}
	t.Logf("%d writes acknowledged, %d refused with OOM", len(acked), unavailable.Load())
}
