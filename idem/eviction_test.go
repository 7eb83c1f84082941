package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestEviction: a server that may evict keys.
//
// By default the store refuses it: Check returns ErrEvictionPolicy, and so
// does the first state change, so a dispatch is UNAVAILABLE and nothing
// runs or is stored. With Options.AllowEviction under a write load that
// overflows maxmemory, no call is ever UNAVAILABLE because of the audit
// chain: a lost head is rebuilt from the stream's last record. What
// eviction loses: evicted records make replays run the tool again (the
// downstream key keeps the side effect single); with allkeys-* policies
// audit records go too (the chain no longer verifies) and a tenant whose
// head and stream are both evicted starts again at sequence 1; with
// volatile-* policies the audit log, which has no TTL, is never evicted.
func TestEviction(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portEviction, "--appendonly", "no", "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portEviction)})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	t.Run("refused", func(t *testing.T) {
		s := newStore(t, rdb)
		if err := s.Check(ctx); !errors.Is(err, idem.ErrEvictionPolicy) {
			t.Fatalf("Check on allkeys-lru: %v, want ErrEvictionPolicy", err)
		}
		if err := s.Check(ctx); !errors.Is(err, guard.ErrStoreRefused) {
			t.Fatalf("Check on allkeys-lru: %v, want it to wrap guard.ErrStoreRefused", err)
		}
		r := newRig(t, s)
		// A refused store answers at once: the first dispatch after the
		// refusal above asks the server nothing (no release commits that
		// would be refused the same way), and neither do the next.
		rt := &redisconn.RoundTrips{}
		rdb.AddHook(rt)
		o := op{p: alice, callID: "c1", key: "k1"}
		for i := range 3 {
			guardtest.Want(t, r.dispatch(t, ctx, o), guard.CodeUnavailable, guard.DeliveryFresh)
			if n := rt.Count(); n != 0 {
				t.Fatalf("dispatch %d on a refused store: %d round trips, want 0", i, n)
			}
		}
		if runs, _ := r.led.count(o); runs != 0 {
			t.Fatalf("the write ran %d times on a refused server", runs)
		}
		if n := rdb.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("%d keys stored on a refused server", n)
		}
	})

	t.Run("lost-head", func(t *testing.T) {
		s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), AllowEviction: true})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, s)
		stream, head := s.AuditKeys(alice.TenantID)
		write := func(i int) string {
			guardtest.Want(t, r.dispatch(t, ctx, op{p: alice, callID: "h" + strconv.Itoa(i), key: "h" + strconv.Itoa(i)}), guard.CodeOK, guard.DeliveryFresh)
			return headSeq(t, rdb, s)
		}
		for i := range 3 {
			write(i)
		}
		rdb.Del(ctx, head) // as eviction would
		if seq := write(3); seq != "4" {
			t.Fatalf("after the head was lost: record %s, want 4 (rebuilt from the stream)", seq)
		}
		if n, err := guard.VerifyAudit(ctx, s, alice.TenantID); err != nil || n != 4 {
			t.Fatalf("chain after the head was rebuilt: %d, %v", n, err)
		}
		rdb.Del(ctx, head, stream) // both gone: nothing in Redis remembers the chain
		if seq := write(4); seq != "1" {
			t.Fatalf("after head and stream were lost: record %s, want 1 (the chain starts again)", seq)
		}
	})

	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		t.Run("load/"+policy, func(t *testing.T) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
				t.Fatal(err)
			}
			evictionLoad(t, rdb, policy)
		})
	}
}

// evictionLoad runs tenants×perTenant writes of 8 KiB results against a
// server that evicts, then replays every one of them.
func evictionLoad(t *testing.T, rdb *redis.Client, policy string) {
	const tenants, perTenant = 6, 60
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, s)
	value := strings.Repeat("v", 8<<10)
	var (
		mu                          sync.Mutex
		unavailable, restarts, back int
		list                        []op
		names                       []string
	)
	call := func(o op) guard.Call {
		c := o.call()
		c.Proposal.Arguments = []byte(`{"key":"` + o.key + `","value":"` + value + `"}`)
		return c
	}
	run := func(replay bool) map[string]int {
		tally := map[string]int{}
		var wg sync.WaitGroup
		for tn := range tenants {
			p := guardtest.Principal("evict-"+strconv.Itoa(tn), "u")
			mine := ops(p, p.TenantID, perTenant)
			if !replay {
				mu.Lock()
				list, names = append(list, mine...), append(names, p.TenantID)
				mu.Unlock()
			}
			wg.Go(func() {
				streamKey, headKey := s.AuditKeys(p.TenantID)
				prev := int64(0)
				for _, o := range mine {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					res, err := r.Guard.Dispatch(ctx, call(o))
					cancel()
					if err != nil {
						t.Errorf("%s: host error %v", o.callID, err)
						return
					}
					// The head as this tenant's only writer left it, unless
					// evicted since (then 0, and not compared).
					h, _ := rdb.Get(context.Background(), headKey).Result()
					seq, _ := strconv.ParseInt(strings.SplitN(h, " ", 2)[0], 10, 64)
					// A smaller number than before is a restart when the
					// stream itself was evicted and begins again at 1 (the
					// head may have been evicted too between two reads);
					// anything else would be a number reused mid-chain.
					restarted := false
					if seq > 0 && seq <= prev {
						first, _ := rdb.XRangeN(context.Background(), streamKey, "-", "+", 1).Result()
						restarted = len(first) == 1 && first[0].ID == "1-1"
					}
					mu.Lock()
					tally[res.Code.String()+"/"+string(res.Delivery)]++
					switch {
					case res.Code == guard.CodeUnavailable:
						unavailable++
					case seq == 0:
						seq = prev
					case restarted:
						restarts++ // head and stream both evicted
					case seq <= prev:
						back++ // a sequence number reused in the middle of a chain
					}
					mu.Unlock()
					prev = seq
				}
			})
		}
		wg.Wait()
		return tally
	}
	first := run(false)
	replays := run(true)
	never, once, again := r.led.tally(t, list)
	if unavailable != 0 || back != 0 {
		t.Errorf("%s: %d UNAVAILABLE, %d sequence numbers reused mid-chain; want 0 and 0", policy, unavailable, back)
	}
	if never != 0 || first["OK/fresh"] != len(list) {
		t.Errorf("%s: first pass %v, %d writes never ran", policy, first, never)
	}
	verified := 0
	for _, tn := range names {
		if _, err := guard.VerifyAudit(context.Background(), s, tn); err == nil {
			verified++
		}
	}
	info, _ := rdb.Info(context.Background(), "stats").Result()
	evicted := "?"
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "evicted_keys:"); ok {
			evicted = v
		}
	}
	if evicted == "0" {
		t.Fatalf("%s: nothing was evicted: the load is too small to show anything", policy)
	}
	if policy == "volatile-lru" && (verified != tenants || restarts != 0) {
		t.Errorf("volatile-lru: %d of %d chains verify, %d restarted; want every chain intact (audit keys have no TTL)",
			verified, tenants, restarts)
	}
	t.Logf("%s: %d writes of 8 KiB, %s keys evicted; replays %v (%d writes ran once, %d again: their records were evicted); "+
		"%d UNAVAILABLE; %d of %d audit chains verify; %d chains restarted at 1 (head and stream evicted)",
		policy, len(list), evicted, replays, once, again, unavailable, verified, tenants, restarts)
}
