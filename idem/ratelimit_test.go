package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// twoPerMinute allows a burst of two calls, then one every 30 s.
var twoPerMinute = redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Minute}

func newLimiter(t *testing.T, rdb redis.UniversalClient, limit idem.LimitFunc, opts idem.LimiterOptions) *idem.Limiter {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = redistest.Prefix(t)
	}
	lim, err := idem.NewLimiter(rdb, limit, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// redis_rate's keys start with "rate:", outside the test prefix
		// the redistest cleanup deletes; they expire anyway.
		for _, tenant := range []string{"tenant-a", "tenant-b", "a", "a:b", "a}:{b", "{a}"} {
			for _, tool := range []string{"get", "put", "b:c", "c", "x"} {
				_ = lim.Reset(context.Background(), tenant, tool)
			}
		}
	})
	return lim
}

// world is a guardtest world whose guard runs the limiter's check.
func world(t *testing.T, rdb redis.UniversalClient, lim *idem.Limiter) *guardtest.World {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	w.Guard = guard.New(w.Down.Tools(), s, guard.Options{Clock: guard.ClockFunc(w.Now), Signer: w.Signer,
		Lease: guardtest.Lease, Checks: []guard.Check{lim.Check}})
	return w
}

// TestLimitThroughGuard runs on miniredis (redis_rate's script works there:
// it needs TIME and redis.replicate_commands, which miniredis has), a real
// server and a real cluster when configured.
func TestLimitThroughGuard(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		lim := newLimiter(t, rdb, func(tenant, tool string) redis_rate.Limit {
			if tool == "put" {
				return twoPerMinute
			}
			return redis_rate.Limit{} // reads: no limit
		}, idem.LimiterOptions{})
		w := world(t, rdb, lim)
		a := guardtest.Principal("tenant-a", "alice")

		guardtest.Want(t, w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"1"}`, CallID: "c1"}), guard.CodeOK, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"2"}`, CallID: "c2"}), guard.CodeOK, guard.DeliveryFresh)
		res := w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"3"}`, CallID: "c3"})
		guardtest.Want(t, res, guard.CodeRateLimit, guard.DeliveryFresh)
		if res.RetryAfter < 25*time.Second || res.RetryAfter > 30*time.Second {
			t.Errorf("retry after %v, want about 30s", res.RetryAfter)
		}
		var wire map[string]any
		if err := json.Unmarshal([]byte(res.String()), &wire); err != nil {
			t.Fatal(err)
		}
		if wire["recovery"] != "retry_after" || wire["retry_after_ms"] == nil {
			t.Errorf("the model sees %s, want retry_after with retry_after_ms", res)
		}
		if w.Down.Writes() != 2 {
			t.Errorf("%d writes, want 2: the limited call must not run", w.Down.Writes())
		}
		// Not replayed: RATE_LIMIT is not terminal.
		guardtest.Want(t, w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"3"}`, CallID: "c3"}), guard.CodeRateLimit, guard.DeliveryFresh)
		// The contract's order: a retry of a call with a result gets it.
		guardtest.Want(t, w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"1"}`, CallID: "c1"}), guard.CodeOK, guard.DeliveryLocalReplay)
		// Reads have no limit; another tenant has its own budget.
		for range 5 {
			guardtest.Want(t, w.Dispatch(t, a, guardtest.Req{Tool: "get", Args: `{"key":"k"}`}), guard.CodeOK, guard.DeliveryFresh)
		}
		b := guardtest.Principal("tenant-b", "alice")
		guardtest.Want(t, w.Dispatch(t, b, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"1"}`, CallID: "c1"}), guard.CodeOK, guard.DeliveryFresh)
	})
}

func TestRetryAfterFollowsServerTime(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	start := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	lim := newLimiter(t, rdb, func(string, string) redis_rate.Limit { return twoPerMinute }, idem.LimiterOptions{})
	ctx := context.Background()
	inv := &guard.Invocation{Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "s"}, Proposal: guard.Proposal{Name: "put"}}
	for i := range 2 {
		if err := lim.Check(ctx, inv); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	err := lim.Check(ctx, inv)
	var ge *guard.Error
	if code, _ := guard.CodeOf(err); code != guard.CodeRateLimit {
		t.Fatalf("third call: %v, want RATE_LIMIT", err)
	}
	if ge, _ = err.(*guard.Error); ge.RetryAfter() != 30*time.Second {
		t.Errorf("retry after %v, want 30s exactly (server time is frozen)", ge.RetryAfter())
	}
	// 10 s later on the server's clock: 20 s to go.
	mr.SetTime(start.Add(10 * time.Second))
	if err := lim.Check(ctx, inv); err == nil || err.(*guard.Error).RetryAfter() != 20*time.Second {
		t.Errorf("10s later: %v, want RATE_LIMIT after 20s", err)
	}
	mr.SetTime(start.Add(30 * time.Second))
	if err := lim.Check(ctx, inv); err != nil {
		t.Errorf("30s later: %v, want allowed", err)
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	start := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	// One call per 1.0005 s: the wait has a fraction of a millisecond.
	lim := newLimiter(t, rdb, func(string, string) redis_rate.Limit {
		return redis_rate.Limit{Rate: 2, Burst: 1, Period: 2001 * time.Millisecond}
	}, idem.LimiterOptions{})
	inv := &guard.Invocation{Principal: guard.Principal{TenantID: "tenant-a", SubjectID: "s"}, Proposal: guard.Proposal{Name: "put"}}
	if err := lim.Check(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	err := lim.Check(context.Background(), inv)
	if ge, ok := err.(*guard.Error); !ok || ge.RetryAfter() != 1001*time.Millisecond {
		t.Fatalf("%v, want RATE_LIMIT after 1001ms (1000.5 rounded up)", err)
	}
}

// Hostile names cannot collide or leave their tenant's hash tag.
func TestKeys(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	lim := newLimiter(t, rdb, func(string, string) redis_rate.Limit { return twoPerMinute }, idem.LimiterOptions{Prefix: "p:"})
	pairs := [][2]string{{"a", "b:c"}, {"a:b", "c"}, {"a}:{b", "c"}, {"{a}", "x"}}
	seen := map[string]bool{}
	for _, p := range pairs {
		k := lim.Key(p[0], p[1])
		if seen[k] {
			t.Errorf("key %s shared", k)
		}
		seen[k] = true
		if !strings.HasPrefix(k, "rate:p:{t") || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q: want rate:p:{t<tenant>}:tool with one hash tag", k)
		}
		if _, err := lim.Allow(context.Background(), p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	keys := mr.Keys()
	if len(keys) != len(pairs) {
		t.Fatalf("redis holds %v, want %d keys", keys, len(pairs))
	}
	for _, k := range keys {
		if !seen[k] {
			t.Errorf("unexpected key %q", k)
		}
		if ttl := mr.TTL(k); ttl <= 0 || ttl > time.Minute {
			t.Errorf("key %s ttl %v: keys must expire", k, ttl)
		}
	}
	// The tag is the store's: a tenant's limits live in its records' slot.
	s, _ := idem.New(rdb, idem.Options{Prefix: "p:"})
	stream, _ := s.AuditKeys("a}:{b")
	if tag := func(k string) string { return k[strings.Index(k, "{"):strings.Index(k, "}")] }; tag(stream) != tag(lim.Key("a}:{b", "c")) {
		t.Errorf("limiter key %s and store key %s have different hash tags", lim.Key("a}:{b", "c"), stream)
	}
	if k := lim.Key("", "x"); strings.Contains(k, "{}") {
		t.Errorf("empty tenant: key %q has an empty hash tag", k)
	}
	if _, err := idem.NewLimiter(rdb, nil, idem.LimiterOptions{Prefix: "bad{"}); err != idem.ErrBadPrefix {
		t.Errorf("prefix with a brace: %v", err)
	}
}

func TestNoLimitAndNormalizedLimits(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	limits := map[string]redis_rate.Limit{
		"none":     {},
		"negative": {Rate: -1, Burst: 5, Period: time.Second},
		"noburst":  {Rate: 1, Period: time.Hour},
		"noperiod": {Rate: 1, Burst: 1},
	}
	lim := newLimiter(t, rdb, func(_, tool string) redis_rate.Limit { return limits[tool] }, idem.LimiterOptions{})
	ctx := context.Background()
	for _, tool := range []string{"none", "negative"} {
		for range 3 {
			if res, err := lim.Allow(ctx, "t", tool); res != nil || err != nil {
				t.Errorf("%s: %v %v, want no limit", tool, res, err)
			}
		}
	}
	if len(mr.Keys()) != 0 {
		t.Errorf("unlimited tools wrote keys %v", mr.Keys())
	}
	for _, tool := range []string{"noburst", "noperiod"} {
		if res, err := lim.Allow(ctx, "t", tool); err != nil || res.Allowed != 1 {
			t.Errorf("%s first call: %+v %v, want allowed (burst 1)", tool, res, err)
		}
		if res, err := lim.Allow(ctx, "t", tool); err != nil || res.Allowed != 0 {
			t.Errorf("%s second call: %+v %v, want limited", tool, res, err)
		}
	}
}

func TestRedisDown(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	mr.Close()
	inv := &guard.Invocation{Principal: guard.Principal{TenantID: "t", SubjectID: "s"}, Proposal: guard.Proposal{Name: "put"}}
	var seen error
	closed, _ := idem.NewLimiter(rdb, func(string, string) redis_rate.Limit { return twoPerMinute },
		idem.LimiterOptions{OnError: func(_ context.Context, err error) { seen = err }})
	if code, _ := guard.CodeOf(closed.Check(context.Background(), inv)); code != guard.CodeUnavailable {
		t.Errorf("fail closed: code %v, want UNAVAILABLE", code)
	}
	if seen == nil {
		t.Error("OnError was not told")
	}
	open, _ := idem.NewLimiter(rdb, func(string, string) redis_rate.Limit { return twoPerMinute }, idem.LimiterOptions{FailOpen: true})
	if err := open.Check(context.Background(), inv); err != nil {
		t.Errorf("fail open: %v", err)
	}
}
