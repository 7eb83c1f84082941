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

// evictionNoticed runs the load on a server that starts under noeviction
// and is switched to policy after the first writes: the store must refuse
// at the first evicted key, long before its periodic check (an hour), and
// lose nothing it acknowledged after the switch but the dispatches in
// flight when Redis evicted; replays run nothing again; restoring
// noeviction lets writes run again after a check passes.
func evictionNoticed(t *testing.T, rdb redis.UniversalClient, policy string) {
	e := newEvictionRun(t, rdb)
	var (
		switched      atomic.Bool
		switchedAt    time.Time
		firstEviction atomic.Int64 // Unix ns the poller first saw an evicted key
		refused       atomic.Int64 // UNAVAILABLE answers after the switch
		done          = make(chan struct{})
	)
	// Before the switch: a few hundred writes under noeviction.
	var okBefore atomic.Int64
	go func() {
		defer close(done)
		for okBefore.Load() < 300 {
			time.Sleep(5 * time.Millisecond)
		}
		switchedAt = time.Now()
		configSet(t, rdb, "maxmemory-policy", policy)
		switched.Store(true)
		for evictedKeys(t, rdb) == 0 {
			if time.Since(switchedAt) > 30*time.Second {
				return
			}
			time.Sleep(time.Millisecond)
		}
		firstEviction.Store(time.Now().UnixNano())
	}()
	deadline := time.Now().Add(60 * time.Second)
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
			case switched.Load() && a.code == guard.CodeUnavailable:
				refused.Add(1)
			}
		}
		e.mu.Unlock()
		// Go on until the store has refused a good many writes.
		return refused.Load() > 4*evictionAgents
	})
	<-done
	if firstEviction.Load() == 0 {
		t.Fatalf("%s: Redis evicted nothing within 30 s of the switch: the load did not fill maxmemory", policy)
	}
	first := time.Unix(0, firstEviction.Load())

	// What the store acknowledged after the switch and no longer holds.
	// Redis's first eviction takes whatever it takes (under allkeys-*, a
	// whole tenant's audit stream may go, with records of answers given
	// before anything was evicted): only noeviction prevents that. What the
	// store bounds is what it acknowledges from then on: at most the
	// dispatches in flight, and none of their records lost beyond those.
	audited := e.audited(t)
	var okAfter, lost, okAfterEviction, lostAfterEviction int
	var acked []op
	for _, a := range e.answers {
		if a.code != guard.CodeOK {
			continue
		}
		acked = append(acked, a.o)
		if a.start.Before(switchedAt) {
			continue
		}
		okAfter++
		if !audited[a.o.callID] {
			lost++
		}
		if a.end.After(first) {
			okAfterEviction++
			if !audited[a.o.callID] {
				lostAfterEviction++
			}
		}
	}
	t.Logf("%s: %d writes acknowledged after the switch, %d of them without an audit record; %d acknowledged after the poller saw the first evicted key (it polls every ms), %d of them without an audit record; %d keys evicted",
		policy, okAfter, lost, okAfterEviction, lostAfterEviction, evictedKeys(t, rdb))
	// The store learns of the eviction from Redis's event, asynchronously:
	// what it acknowledges after the first eviction is what reached it
	// before the event did, one round or so of the agents (0 to 38 on a
	// quiet machine, 69 while another build loaded it). The bound asserted
	// is that window, generously: a few rounds of the agents, against the
	// thousands a periodic check let through.
	if okAfterEviction > 4*evictionAgents || lostAfterEviction > 4*evictionAgents {
		t.Errorf("%s: %d writes acknowledged after the first eviction, %d without an audit record; want at most a few rounds of the %d agents",
			policy, okAfterEviction, lostAfterEviction, evictionAgents)
	}
	if strings.HasPrefix(policy, "volatile-") && lost != 0 {
		// Audit logs have no TTL: a volatile policy never evicts them.
		t.Errorf("%s: %d acknowledged writes lost their audit record, want 0", policy, lost)
	}
	if !strings.Contains(e.logs.String(), "evicted a key") || !strings.Contains(e.logs.String(), "reason=evicted") {
		t.Errorf("%s: no log line says why:\n%s", policy, e.logs.String())
	}
	if got := refusals(t, e.meter, "evicted"); got < 1 {
		t.Errorf("%s: %s{reason=evicted} = %d, want at least 1", policy, idem.MetricStoreRefusals, got)
	}

	// Replays of every acknowledged write: none runs again.
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
				if code := e.write(t, o); code != guard.CodeUnavailable && code != guard.CodeOK {
					t.Errorf("%s: replay of %s answered %s", policy, o.callID, code)
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
// within seconds; the store's periodic check is an hour away. On a
// standalone server and on a cluster (every master switched), for
// allkeys-lru and volatile-lru.
func TestEvictionNoticedAtFirstKey(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	if testing.Short() {
		t.Skip("a write load against servers of its own")
	}
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		t.Run("server/"+policy, func(t *testing.T) {
			port := portEvicted
			startRedis(t, t.TempDir(), port, "--appendonly", "no", "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
			rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port), PoolSize: 2 * evictionAgents})
			t.Cleanup(func() { _ = rdb.Close() })
			evictionNoticed(t, rdb, policy)
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
		evictionNoticed(t, rdb, "allkeys-lru")
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
