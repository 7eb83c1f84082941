package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// meter is the downstream system of the budget tests: a paid API that
// counts its executions per tenant and per call (the "key" argument), and
// keeps a receipt per downstream idempotency key for its writes.
type meter struct {
	mu       sync.Mutex
	ran      map[string]int // per tenant
	runsOf   map[string]int // per key
	receipts map[string]json.RawMessage
}

func newMeter() *meter {
	return &meter{ran: map[string]int{}, runsOf: map[string]int{}, receipts: map[string]json.RawMessage{}}
}

// tools: spend (a write) and look (a read), each execution costing 1.
func (m *meter) tools() *toolset.Set {
	run := func(inv *guard.Invocation, in chargeIn) json.RawMessage {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.ran[inv.Principal.TenantID]++
		m.runsOf[in.Key]++
		out, _ := json.Marshal(map[string]any{"key": in.Key, "run": m.runsOf[in.Key]})
		if inv.IdempotencyKey != "" {
			m.receipts[inv.IdempotencyKey] = out
		}
		return out
	}
	spend := toolset.Write("spend", "Spend on a paid API.", func(_ context.Context, inv *guard.Invocation, in chargeIn) (json.RawMessage, error) {
		return run(inv, in), nil
	}, &toolset.Options[chargeIn, json.RawMessage]{Budget: &toolset.Budget[chargeIn]{Cost: 1},
		Receipt: func(_ context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			r, ok := m.receipts[inv.IdempotencyKey]
			return r, ok, nil
		}})
	look := toolset.Read("look", "Look up on a paid API.", func(_ context.Context, inv *guard.Invocation, in chargeIn) (json.RawMessage, error) {
		return run(inv, in), nil
	}, &toolset.Options[chargeIn, json.RawMessage]{Budget: &toolset.Budget[chargeIn]{Cost: 1}})
	return toolset.MustNew(spend, look)
}

// executions returns how many times the tenant's calls ran.
func (m *meter) executions(tenant string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(m.ran[tenant])
}

// ranTwice returns the keys that ran more than once.
func (m *meter) ranTwice() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, n := range m.runsOf {
		if n > 1 {
			out = append(out, k)
		}
	}
	return out
}

// budgetWorld is a guard with a tenant budget over a store, on the
// settable clock of a guardtest.World.
type budgetWorld struct {
	*guardtest.World
	store *idem.Store
	g     *guard.Guard
	m     *meter
	limit int64
}

const budgetPeriod = 24 * time.Hour

func newBudgetWorld(t *testing.T, rdb redis.UniversalClient, limit int64) *budgetWorld {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	w := &budgetWorld{World: guardtest.NewWorld(t, s), m: newMeter(), limit: limit}
	w.use(s)
	return w
}

// use points the world's guard at the store.
func (w *budgetWorld) use(s *idem.Store) {
	w.store = s
	w.g = guard.New(w.m.tools(), s, guard.Options{Clock: guard.ClockFunc(w.Now), Lease: guardtest.Lease,
		TenantBudget: guard.TenantBudget{Limit: w.limit, Period: budgetPeriod}})
}

// call is a call of tool ("spend" or "look") for tenant, keyed id (its call
// id, idempotency key and argument).
func budgetCall(tenant, tool, id string) guard.Call {
	c := guard.Call{Principal: guardtest.Principal(tenant, "u"),
		Proposal: guard.Proposal{Name: tool, Arguments: []byte(`{"key":"` + id + `"}`)},
		Context:  guard.ExecutionContext{Provider: "budget", CallID: id}}
	if tool == "spend" {
		c.Context.IdempotencyKey = id
	}
	return c
}

func (w *budgetWorld) dispatch(t *testing.T, c guard.Call, deadline time.Duration) *guard.Result {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := w.g.Dispatch(ctx, c)
	if err != nil {
		t.Errorf("%s: host error %v", c.Context.CallID, err)
		return &guard.Result{Code: guard.CodeUnavailable}
	}
	return res
}

// spent returns the tenant's budget spent in the world's period.
func (w *budgetWorld) spent(t *testing.T, tenant string) int64 {
	t.Helper()
	return spentOf(t, w.store, tenant, w.limit, w.Now())
}

// spentOf returns what the tenant spent of its budget of limit in the
// period (budgetPeriod) of now, measured through the store's own
// Budgeter: the largest charge it still takes (a probe, given back at
// once) is what is left.
func spentOf(t *testing.T, b guard.Budgeter, tenant string, limit int64, now time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	lo, hi := int64(0), limit
	for lo < hi {
		mid := (lo + hi + 1) / 2
		c := &guard.BudgetCharge{Token: fmt.Sprintf("probe-%d", probes.Add(1)), TenantID: tenant, Tool: "probe", Cost: mid,
			TenantLimit: limit, PeriodStart: now.Truncate(budgetPeriod), Period: budgetPeriod, Now: now}
		v, err := b.Charge(ctx, c)
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		if v != guard.BudgetTaken {
			hi = mid - 1
			continue
		}
		if err := b.Refund(ctx, c); err != nil {
			t.Fatalf("probe refund: %v", err)
		}
		lo = mid
	}
	return limit - lo
}

// probes numbers spentOf's probe tokens.
var probes atomic.Int64

// wantExact checks the promise: per tenant, the charges kept are the
// executions, and no call ran twice.
func (w *budgetWorld) wantExact(t *testing.T, tenants ...string) {
	t.Helper()
	for _, tn := range tenants {
		if ran, kept := w.m.executions(tn), w.spent(t, tn); ran != kept {
			t.Errorf("tenant %s: %d executions, %d charges kept", tn, ran, kept)
		}
	}
	if twice := w.m.ranTwice(); len(twice) != 0 {
		t.Errorf("ran more than once: %v", twice)
	}
}

// settle follows the contract for the writes that got no final answer:
// after their lease, a status query asks the receipt, which settles each
// as run (its charge kept) or not (its charge given back).
func (w *budgetWorld) settle(t *testing.T, unsettled []guard.Call) map[string]int {
	w.Advance(guardtest.Lease + time.Second)
	out := map[string]int{}
	for _, c := range unsettled {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := w.g.QueryStatus(ctx, guard.StatusCall{Principal: c.Principal, OperationID: c.Context.CallID, Tool: c.Proposal.Name,
			Context: guard.ExecutionContext{Provider: "budget", CallID: "status-" + c.Context.CallID, IdempotencyKey: c.Context.IdempotencyKey}})
		cancel()
		if err != nil {
			t.Fatalf("status of %s: %v", c.Context.CallID, err)
		}
		out[res.Code.String()+"/"+string(res.Delivery)]++
	}
	return out
}

// TestLostChargeReplies: the reply to a charge is lost on every link to
// the servers (each server behind a proxy of its own that loses the
// replies to the scripts that take charges: a write's reserve, a read's
// charge). Lost once, go-redis sends the charge again and it is taken
// once; lost every time, the guard gives up, answers UNAVAILABLE, runs
// nothing and gives the charge back by its token (a write's by releasing
// its reservation). Whatever was lost, every execution is charged exactly
// once, per tenant, once the writes left without an answer are settled as
// the contract says (a status query after the lease).
func TestLostChargeReplies(t *testing.T) {
	for _, backend := range []string{redistest.BackendStandalone, redistest.BackendCluster} {
		t.Run(backend, func(t *testing.T) {
			rdb, proxies := redistest.Proxied(t, backend)
			w := newBudgetWorld(t, rdb, 1<<20)
			if err := w.store.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			tenants := []string{"lost-a", "lost-b", "lost-c", "lost-d", "lost-e", "lost-f"}
			var (
				mu        sync.Mutex
				unsettled []guard.Call
			)
			for _, ph := range []struct {
				name, tool, match  string
				lose, agents, each int
			}{
				// Lost once or a few times: go-redis sends it again.
				{"write/resent", "spend", "_reserve", 12, 16, 8},
				{"read/resent", "look", "_charge", 12, 16, 8},
				// Lost every time: the guard gives up. One agent, so that no
				// release or refund travels in a pipeline with a charge.
				{"write/gone", "spend", "_reserve", 1 << 20, 1, 12},
				{"read/gone", "look", "_charge", 1 << 20, 1, 12},
			} {
				t.Run(ph.name, func(t *testing.T) {
					lostBefore := proxies.Lost()
					proxies.LoseReplies(ph.match, ph.lose)
					codes := map[string]int{}
					var wg sync.WaitGroup
					for a := range ph.agents {
						wg.Go(func() {
							for i := range ph.each {
								c := budgetCall(tenants[(a+i)%len(tenants)], ph.tool, fmt.Sprintf("%s-%d-%d", ph.name, a, i))
								res := w.dispatch(t, c, 10*time.Second)
								mu.Lock()
								codes[res.Code.String()]++
								if c.Proposal.Name == "spend" && res.Code != guard.CodeOK {
									unsettled = append(unsettled, c)
								}
								mu.Unlock()
							}
						})
					}
					wg.Wait()
					proxies.LoseReplies("", 0)
					lost := proxies.Lost() - lostBefore
					t.Logf("%s: %d replies lost; answers %v", ph.name, lost, codes)
					if lost == 0 {
						t.Fatalf("no reply was lost: the proxies did not match %q", ph.match)
					}
					if ph.lose < 1<<20 && codes["OK"] == 0 {
						t.Errorf("no call ran after its charge was sent again")
					}
					if ph.lose == 1<<20 && codes["UNAVAILABLE"] != ph.agents*ph.each {
						t.Errorf("every charge's reply lost: answers %v, want all UNAVAILABLE", codes)
					}
				})
			}
			if t.Failed() {
				return
			}
			settled := w.settle(t, unsettled)
			t.Logf("%d writes settled by a status query: %v", len(unsettled), settled)
			w.wantExact(t, tenants...)
		})
	}
}

// TestReplaysHoldNoBudget: a tenant has spent 80 of 100; 64 agents replay
// its 80 writes over and over (by call id and by key) while one writer
// makes 20 fresh writes one after another: each runs (the last at 99 of
// 100 spent), since replays take no charge, and the 21st is
// BUDGET_EXHAUSTED. On miniredis, the server and the cluster.
func TestReplaysHoldNoBudget(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		const limit, before, agents = 100, 80, 64
		w := newBudgetWorld(t, rdb, limit)
		const tenant = "replays"
		var done []guard.Call
		for i := range before {
			c := budgetCall(tenant, "spend", fmt.Sprintf("w%d", i))
			guardtest.Want(t, w.dispatch(t, c, 10*time.Second), guard.CodeOK, guard.DeliveryFresh)
			done = append(done, c)
		}
		stop := make(chan struct{})
		var replays, wrong atomic.Int64
		var wg sync.WaitGroup
		for a := range agents {
			wg.Go(func() {
				for i := a; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c := done[i%len(done)]
					if i%2 == 1 { // by key, under a new call id
						c.Context.CallID = fmt.Sprintf("again-%d-%d", a, i)
					}
					res := w.dispatch(t, c, 10*time.Second)
					replays.Add(1)
					if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
						wrong.Add(1)
					}
				}
			})
		}
		var fresh []string
		for i := range limit - before + 1 {
			res := w.dispatch(t, budgetCall(tenant, "spend", fmt.Sprintf("fresh%d", i)), 10*time.Second)
			fresh = append(fresh, res.Code.String())
		}
		close(stop)
		wg.Wait()
		t.Logf("%d replays by %d agents during %d fresh writes: %v", replays.Load(), agents, len(fresh), fresh)
		for i, code := range fresh {
			want := guard.CodeOK.String()
			if i == limit-before {
				want = guard.CodeBudgetExhausted.String()
			}
			if code != want {
				t.Errorf("fresh write %d (at %d of %d spent): %s, want %s", i+1, before+i, limit, code, want)
			}
		}
		if wrong.Load() != 0 {
			t.Errorf("%d of %d replays were not answered OK local_replay", wrong.Load(), replays.Load())
		}
		w.wantExact(t, tenant)
	})
}

// TestBudgetCountersHaveNoTTL: a tenant's budget keys carry no TTL (a
// volatile-* policy never evicts them, as it never evicts audit logs),
// and what they no longer need goes anyway: the charges themselves drop
// the fields whose time is past (a read's token after the retention, a
// period's counter a period after it ended), a few per charge, until only
// the current ones are left.
func TestBudgetCountersHaveNoTTL(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		w := newBudgetWorld(t, rdb, 1000)
		prefix := redistest.Prefix(t)
		s, err := idem.New(rdb, idem.Options{Prefix: prefix, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		w.use(s)
		const tenant = "no-ttl"
		hash, due := idem.BudgetKeys(prefix, tenant)
		for i := range 10 {
			guardtest.Want(t, w.dispatch(t, budgetCall(tenant, "spend", fmt.Sprintf("w%d", i)), 10*time.Second), guard.CodeOK, guard.DeliveryFresh)
			guardtest.Want(t, w.dispatch(t, budgetCall(tenant, "look", fmt.Sprintf("r%d", i)), 10*time.Second), guard.CodeOK, guard.DeliveryFresh)
		}
		for _, k := range []string{hash, due} {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl != -1 { // go-redis keeps -1 (no TTL) and -2 (no key) as they are
				t.Fatalf("%s: PTTL %d, want -1 (none)", k, ttl)
			}
		}
		// The period's counter and the reads' ten tokens (a committed
		// write's token is forgotten at its commit).
		if n := rdb.HLen(ctx, hash).Val(); n != 11 {
			t.Fatalf("%d fields after 10 writes and 10 reads, want 11: %v", n, rdb.HKeys(ctx, hash).Val())
		}
		if spent := w.spent(t, tenant); spent != 20 {
			t.Fatalf("spent %d, want 20", spent)
		}
		// Two periods later, the next charges drop what is due, four each:
		// the last period's fields (its counter, ten reads' tokens, the
		// probes' tokens given back: fewer than forty) are gone after ten.
		w.Advance(2 * budgetPeriod)
		const later = 10
		for i := range later {
			guardtest.Want(t, w.dispatch(t, budgetCall(tenant, "look", fmt.Sprintf("later%d", i)), 10*time.Second), guard.CodeOK, guard.DeliveryFresh)
		}
		fields := rdb.HKeys(ctx, hash).Val()
		if len(fields) != later+1 {
			t.Fatalf("%d fields left, want %d (this period's counter and its reads' tokens): %q", len(fields), later+1, fields)
		}
		if n := rdb.ZCard(ctx, due).Val(); n != int64(len(fields)) {
			t.Fatalf("due set of %d, hash of %d fields", n, len(fields))
		}
		if spent := w.spent(t, tenant); spent != later {
			t.Fatalf("spent %d in the new period, want %d", spent, later)
		}
	})
}
