package idem_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	portSurvives       = 19100
	evictionAgents     = 64
	evictionTenants    = 20
)

// evictionRun is what happened to the writes of a load against a server
// whose policy is switched to evict.
type evictionRun struct {
	store  *idem.Store
	prefix string
	rig    *rig
	logs   *syncBuffer
	meter  *sdkmetric.ManualReader

	mu      sync.Mutex
	answers []evictionAnswer
}

type evictionAnswer struct {
	o          op
	code       guard.Code
	start, end time.Time // when the call was made, and when its answer reached the test
	// ran is when the write's tool returned (zero if it never ran): the
	// guard sends the commit after it, so a commit the server ran before
	// a moment has ran before it too. The answer's arrival (end) dates
	// nothing on the server: a loaded machine delivers a commit's reply
	// long after the server ran it.
	ran time.Time
}

func newEvictionRun(t *testing.T, rdb redis.UniversalClient) *evictionRun {
	t.Helper()
	e := &evictionRun{logs: &syncBuffer{}, meter: sdkmetric.NewManualReader(), prefix: redistest.Prefix(t)}
	// An hour between periodic checks: whatever refuses the store in this
	// test is the eviction itself.
	s, err := idem.New(rdb, idem.Options{Prefix: e.prefix, CheckEvery: time.Hour,
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
	c := e.call(o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := e.rig.Guard.Dispatch(ctx, c)
	if err != nil {
		t.Errorf("%s: host error %v", o.callID, err)
		return guard.CodeUnavailable
	}
	e.mu.Lock()
	e.answers = append(e.answers, evictionAnswer{o: o, code: res.Code, start: start, end: time.Now(), ran: e.rig.led.ran(o)})
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

// evictionNotForgotten runs the load on a server that starts under
// noeviction and is switched to policy under it, with the store's periodic
// check an hour away; another application's writes then fill maxmemory
// and Redis evicts; then, the load still running, the operator switches
// the server back to noeviction (and lifts maxmemory). What must hold:
//
//   - every write and replay that starts after the switch is refused
//     (UNAVAILABLE) and runs nothing, before and after the switch back,
//     until an operator acknowledges the eviction: the refusal does not
//     end with the policy, and a store started afresh (a restarted
//     process) refuses too;
//   - no write is acknowledged whose commit the server ran after the
//     switch, and none committed after the first eviction lacks its
//     audit record. A commit is dated by when it was sent (after its tool
//     returned), not by when its answer arrived: under load a commit the
//     server ran before the switch can answer after Redis evicted, and its
//     audit record is then among what Redis takes of the writes
//     acknowledged before the switch;
//   - the store's report (Evictions, which toolctl evictions prints) names
//     every tenant that lost keys (each one the test's own listener heard
//     evicted) and exactly the audit sequence numbers Redis took (found
//     by reading every tenant's whole stream);
//   - after the acknowledgement writes run again, and a replay of an
//     acknowledged write never runs it again: it is answered from its
//     record, or, its record gone, its receipt is asked first and it is
//     OUTCOME_UNKNOWN, which a status query settles from the receipt;
//   - the log and the metric say why (the policy, and the eviction).
//
// With full, the switch comes once the load filled maxmemory and Redis
// refuses its writes (OOM), as an operator would switch to unblock a full
// server: Redis then evicts at its next command, whatever it is.
func evictionNotForgotten(t *testing.T, rdb redis.UniversalClient, policy string, full bool) {
	e := newEvictionRun(t, rdb)
	heard := listenEvictions(t, rdb)
	var (
		switched   atomic.Bool
		switchedAt time.Time
		backAt     time.Time
		stop       atomic.Bool
		done       = make(chan struct{})
		okBefore   atomic.Int64
		oomBefore  atomic.Int64 // UNAVAILABLE answers before the switch
	)
	go func() {
		defer close(done)
		defer stop.Store(true)
		for okBefore.Load() < 300 || full && oomBefore.Load() < 50 {
			time.Sleep(5 * time.Millisecond)
		}
		configSet(t, rdb, "maxmemory-policy", policy)
		switchedAt = time.Now()
		switched.Store(true)
		// The agents go on writing (refused) while another application
		// fills the server until it evicts.
		fill(t, rdb, strings.HasPrefix(policy, "volatile-"), 200)
		firstAt := time.Now()
		// The store hears of the eviction (its log says so) within a
		// moment.
		for !strings.Contains(e.logs.String(), "evicted keys") && time.Since(firstAt) < 10*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		// The operator switches back, the load still running: the store
		// checks the server again at the next call a second after its
		// last refusal, finds noeviction, and still refuses.
		configSet(t, rdb, "maxmemory-policy", "noeviction")
		configSet(t, rdb, "maxmemory", "0")
		backAt = time.Now()
		time.Sleep(3 * time.Second)
	}()
	deadline := time.Now().Add(90 * time.Second)
	e.load(t, "a", func() bool {
		if time.Now().After(deadline) {
			return true
		}
		e.mu.Lock()
		if n := len(e.answers); n > 0 && !switched.Load() {
			switch e.answers[n-1].code {
			case guard.CodeOK:
				okBefore.Add(1)
			case guard.CodeUnavailable:
				oomBefore.Add(1)
			}
		}
		e.mu.Unlock()
		return stop.Load()
	})
	<-done
	if t.Failed() {
		return
	}
	firstEviction := heard.first()
	if firstEviction.IsZero() {
		t.Fatal("the test's listener heard no eviction")
	}

	// What the store acknowledged, when, and what of it has no audit
	// record any more.
	audited := e.audited(t)
	var okAfterSwitch, startedAfter, committedAfter, unauditedCommittedAfterEviction, answeredAfterEviction, unauditedAnsweredAfterEviction,
		lostBefore, okBeforeN, afterBack, unknownAfter int
	var acked []op
	for _, a := range e.answers {
		if a.code == guard.CodeOutcomeUnknown && a.end.After(switchedAt) {
			unknownAfter++ // ran, its commit refused by the fence: not acknowledged
		}
		if a.start.After(backAt) && a.code != guard.CodeUnavailable {
			afterBack++
		}
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
		okAfterSwitch++
		if a.start.After(switchedAt) {
			startedAfter++
		}
		// Its commit was sent after the switch: the server ran it after
		// the switch, and the fence must have refused it.
		if a.ran.After(switchedAt) {
			committedAfter++
		}
		if a.ran.After(firstEviction) && !audited[a.o.callID] {
			unauditedCommittedAfterEviction++
		}
		// Answered after the first eviction, its commit sent before the
		// switch: the server ran it before the switch (the fence refuses
		// it after), its answer was slow. Reported, not judged.
		if a.end.After(firstEviction) && !a.ran.After(switchedAt) {
			answeredAfterEviction++
			if !audited[a.o.callID] {
				unauditedAnsweredAfterEviction++
			}
		}
	}
	never, _, again := e.rig.led.tally(t, acked)
	t.Logf("%s (full %v): %d writes acknowledged before the switch, %d of them without an audit record after the eviction; "+
		"%d acknowledged after the switch (in flight at it), %d of them with their commit sent after it; %d answered after the first eviction "+
		"(their commits sent before the switch, the answers slow), %d of those without an audit record; "+
		"%d started after the switch; %d ran but their commit was refused (OUTCOME_UNKNOWN); %d answered other than UNAVAILABLE after the switch back; "+
		"%d keys evicted",
		policy, full, okBeforeN, lostBefore, okAfterSwitch, committedAfter, answeredAfterEviction, unauditedAnsweredAfterEviction,
		startedAfter, unknownAfter, afterBack, evictedKeys(t, rdb))
	if startedAfter != 0 || afterBack != 0 {
		t.Errorf("%s: %d writes that started after the switch were acknowledged, %d started after the switch back were answered; want 0 and 0",
			policy, startedAfter, afterBack)
	}
	if okAfterSwitch > evictionAgents || committedAfter != 0 || unauditedCommittedAfterEviction != 0 {
		t.Errorf("%s: %d writes acknowledged after the switch (want at most the %d in flight), %d of them with their commit sent after it "+
			"(want 0: the server ran those after the switch), %d with their commit sent after the first eviction and no audit record (want 0)",
			policy, okAfterSwitch, evictionAgents, committedAfter, unauditedCommittedAfterEviction)
	}
	if never != 0 || again != 0 {
		t.Errorf("%s: of %d acknowledged writes %d never ran, %d ran again during the load", policy, len(acked), never, again)
	}
	if strings.HasPrefix(policy, "volatile-") && lostBefore != 0 {
		// Audit logs have no TTL: a volatile policy never evicts them.
		t.Errorf("%s: %d acknowledged writes lost their audit record, want 0", policy, lostBefore)
	}
	// The log and the metric say why: the eviction, and, when a script
	// saw the policy before Redis evicted, the policy. On a full server
	// Redis evicts at the first command after the switch, and the store
	// refuses from that event on: no script runs to see the policy.
	wantLogs, reasons := []string{"evicted keys", "reason=evicted"}, []string{"evicted"}
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

	// A process started afresh refuses the server too: the eviction is in
	// the server's count and in the marker, not only in this process.
	restarted, err := idem.New(rdb, idem.Options{Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Close() })
	if err := restarted.Check(context.Background()); !errors.Is(err, idem.ErrEvicted) {
		t.Errorf("%s: a store started after the eviction: Check %v, want ErrEvicted", policy, err)
	}

	// Replays of every acknowledged write, noeviction restored and nothing
	// acknowledged: each refused, none runs again.
	replay := func(want func(guard.Code) bool, what string) (codes map[string]int, reran int) {
		codes = map[string]int{}
		before := map[string]int{}
		for _, o := range acked {
			before[o.key], _ = e.rig.led.count(o)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range evictionAgents {
			wg.Go(func() {
				for j := i; j < len(acked); j += evictionAgents {
					o := acked[j]
					code := e.write(t, o)
					mu.Lock()
					codes[code.String()]++
					if runs, _ := e.rig.led.count(o); runs != before[o.key] {
						reran++
					}
					mu.Unlock()
					if !want(code) {
						t.Errorf("%s: replay of %s %s: %s", policy, o.callID, what, code)
					}
				}
			})
		}
		wg.Wait()
		return codes, reran
	}
	if codes, reran := replay(func(c guard.Code) bool { return c == guard.CodeUnavailable }, "before the acknowledgement"); reran != 0 {
		t.Errorf("%s: replaying %d acknowledged writes before the acknowledgement ran %d again (%v), want 0", policy, len(acked), reran, codes)
	}

	// What Redis took, as the store reports it, against what is left.
	report, err := e.store.Evictions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantReport(t, e, report, heard.tenants(e.prefix))
	if !report.Pending() {
		t.Errorf("%s: the report says no eviction waits", policy)
	}
	ackd, err := e.store.AckEvictions(context.Background(), "tester@ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(ackd.Tenants) != len(report.Tenants) {
		t.Errorf("%s: acknowledged %d tenants, reported %d: %+v\n%+v", policy, len(ackd.Tenants), len(report.Tenants), ackd.Tenants, report.Tenants)
	}

	// Acknowledged: writes run again once the store checks (at its next
	// call a second after its last refusal), and a replay of an
	// acknowledged write never runs it again.
	ran := false
	for i := range 300 {
		o := op{p: alice, callID: "after-" + strconv.Itoa(i), key: "after-" + strconv.Itoa(i)}
		if e.write(t, o) == guard.CodeOK {
			ran = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ran {
		t.Fatalf("%s: no write ran after the acknowledgement", policy)
	}
	// A new write of a tenant that lost records: no record, so its receipt
	// is asked, finds nothing, and it runs.
	for _, lt := range ackd.Tenants {
		o := op{p: guardtest.Principal(lt.TenantID, "u"), callID: "new-" + lt.TenantID, key: "new-" + lt.TenantID}
		if code := e.write(t, o); code != guard.CodeOK {
			t.Errorf("%s: a new write of %s, which lost records, after the acknowledgement: %s, want OK", policy, lt.TenantID, code)
		}
		if runs, _ := e.rig.led.count(o); runs != 1 {
			t.Errorf("%s: a new write of %s ran %d times", policy, lt.TenantID, runs)
		}
	}
	codes, reran := replay(func(c guard.Code) bool { return c == guard.CodeOK || c == guard.CodeOutcomeUnknown }, "after the acknowledgement")
	if reran != 0 {
		t.Errorf("%s: replaying %d acknowledged writes after the acknowledgement ran %d again (%v), want 0", policy, len(acked), reran, codes)
	}
	// An OUTCOME_UNKNOWN (a record that went; its receipt found) is
	// settled from the receipt by a status query.
	settled := map[string]int{}
	for _, o := range acked {
		res, err := e.rig.Guard.Dispatch(context.Background(), e.call(o))
		if err != nil {
			t.Fatal(err)
		}
		if res.Code == guard.CodeOutcomeUnknown {
			s := e.rig.status(t, o)
			settled[s.Code.String()+"/"+string(s.Delivery)]++
			if s.Code != guard.CodeOK || s.Delivery != guard.DeliveryReceiptReconciled {
				t.Errorf("%s: status of %s, whose record went: %s, want OK receipt_reconciled", policy, o.callID, s)
			}
		}
	}
	t.Logf("%s: reported and acknowledged %d tenants; replays after the acknowledgement %v, 0 ran again; status queries %v",
		policy, len(ackd.Tenants), codes, settled)
}

// call is the op's call as write sends it.
func (e *evictionRun) call(o op) guard.Call {
	c := o.call()
	c.Proposal.Arguments = []byte(`{"key":"` + o.key + `","value":"` + evictionValue + `"}`)
	return c
}

// evictionHeard is what the test's own listener heard: the keys evicted,
// and when the first came.
type evictionHeard struct {
	mu      sync.Mutex
	keys    []string
	firstAt time.Time
}

// listenEvictions subscribes to every master's evicted-key events, as the
// store does, on connections of the test's own.
func listenEvictions(t *testing.T, rdb redis.UniversalClient) *evictionHeard {
	h := &evictionHeard{}
	configSet(t, rdb, "notify-keyspace-events", "Ee")
	err := redisconn.ForEachMaster(context.Background(), rdb, func(ctx context.Context, c *redis.Client) error {
		ps := c.Subscribe(ctx, "__keyevent@0__:evicted")
		if _, err := ps.Receive(ctx); err != nil {
			return err
		}
		t.Cleanup(func() { _ = ps.Close() })
		go func() {
			for m := range ps.Channel() {
				h.mu.Lock()
				if h.firstAt.IsZero() {
					h.firstAt = time.Now()
				}
				h.keys = append(h.keys, m.Payload)
				h.mu.Unlock()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *evictionHeard) first() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firstAt
}

// tenants returns the tenants of the store's keys that were evicted.
func (h *evictionHeard) tenants(prefix string) map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for _, k := range h.keys {
		rest, ok := strings.CutPrefix(k, prefix+"{t")
		if !ok {
			continue
		}
		tag, _, _ := strings.Cut(rest, "}")
		if b, err := base64.RawURLEncoding.DecodeString(tag); err == nil {
			out[string(b)] = true
		}
	}
	return out
}

// wantReport checks a report against what Redis holds: every tenant whose
// key the test heard evicted is named, and each tenant's ranges are the
// sequence numbers missing from its stream below its head (every one, if
// head and stream went: a range without an end).
func wantReport(t *testing.T, e *evictionRun, r *idem.EvictionReport, heard map[string]bool) {
	t.Helper()
	ctx := context.Background()
	rdb := e.store.Client()
	got := map[string]idem.LostTenant{}
	for _, lt := range r.Tenants {
		if _, twice := got[lt.TenantID]; twice {
			t.Errorf("the report names tenant %s twice", lt.TenantID)
		}
		got[lt.TenantID] = lt
	}
	lostRecords, open := 0, 0
	for _, lt := range r.Tenants {
		if !strings.HasPrefix(lt.TenantID, "ev-") {
			t.Errorf("the report names tenant %q, which no agent wrote for", lt.TenantID)
		}
	}
	for tn := range evictionTenants {
		tenant := "ev-" + strconv.Itoa(tn)
		stream, head := e.store.AuditKeys(tenant)
		var want []idem.SeqRange
		h, herr := rdb.Get(ctx, head).Result()
		msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		top := int64(0)
		if herr == nil {
			top, _ = strconv.ParseInt(strings.SplitN(h, " ", 2)[0], 10, 64)
		}
		present := map[int64]bool{}
		for _, m := range msgs {
			seq, _ := strconv.ParseInt(strings.SplitN(m.ID, "-", 2)[0], 10, 64)
			present[seq] = true
			top = max(top, seq)
		}
		if top == 0 && heard[tenant] {
			want = []idem.SeqRange{{From: 1}} // all of it, up to where nobody knows
			open++
		}
		for seq := int64(1); seq <= top; seq++ {
			if present[seq] {
				continue
			}
			lostRecords++
			if n := len(want); n > 0 && want[n-1].To == seq-1 {
				want[n-1].To = seq
			} else {
				want = append(want, idem.SeqRange{From: seq, To: seq})
			}
		}
		lt := got[tenant]
		if !slices.Equal(lt.Lost, want) {
			t.Errorf("tenant %s: report says Redis took %v, the stream lacks %v", tenant, lt.Lost, want)
		}
		if heard[tenant] && !lt.Named {
			t.Errorf("tenant %s: its keys were evicted, and the report does not name it", tenant)
		}
	}
	t.Logf("report: %d tenants (%d heard evicted); Redis took %d audit records below a head it left, and every record of %d tenants "+
		"whose head and stream both went (reported 1-?)", len(r.Tenants), len(heard), lostRecords, open)
}

// TestEvictionNotForgotten: an operator switches a running server to
// an evicting policy (CONFIG SET maxmemory-policy) under 64 agents of 20
// tenants writing at once, with maxmemory small enough that Redis evicts
// within seconds of another application's writes, and switches it back
// under the load; the store's periodic check is an hour away. On a
// standalone server and on a cluster (every master switched), for
// allkeys-lru and volatile-lru, and on a server switched to allkeys-lru
// once the load filled it (full). evictionNotForgotten says what must
// hold.
func TestEvictionNotForgotten(t *testing.T) {
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
			redistest.StartServer(t, t.TempDir(), port, "--appendonly", "no", "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
			rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port), PoolSize: 2 * evictionAgents})
			t.Cleanup(func() { _ = rdb.Close() })
			evictionNotForgotten(t, rdb, c.policy, c.full)
		})
	}
	t.Run("cluster/allkeys-lru", func(t *testing.T) {
		redistest.NeedBinaries(t, "redis-cli")
		var addrs []string
		for i := range 3 {
			port := portEvictedCluster + i
			redistest.StartServer(t, t.TempDir(), port, "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
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
		evictionNotForgotten(t, rdb, "allkeys-lru", false)
	})
}

// TestMaxmemoryLoweredUnderNoeviction: maxmemory lowered at run time under
// noeviction makes Redis refuse the store's writes (OOM): they are
// answered UNAVAILABLE and nothing of them runs, and every write
// acknowledged before is still there (a replay is answered from its
// record).
func TestMaxmemoryLoweredUnderNoeviction(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portEvicted+1, "--appendonly", "no", "--maxmemory-policy", "noeviction")
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

// TestEvictionRefusalSurvives: once the server evicted keys, the refusal
// is kept in three places, so that it survives any one of them going: the
// servers' evicted-key count, the marker in Redis, and the process that
// noticed. The marker evicted while the policy still evicts is written
// back by the refusing store at its next check; a store started afresh
// (a restarted process) refuses on the count, or, the count reset by
// someone other than the acknowledgement, on the marker; with both gone,
// the process that noticed still refuses and writes the marker back. Only
// the acknowledgement ends it, for every store.
func TestEvictionRefusalSurvives(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portSurvives, "--appendonly", "no", "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portSurvives)})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	e := newEvictionRun(t, rdb)
	marker := e.prefix + "evictions"
	for i := range 40 {
		o := op{p: guardtest.Principal("ev-"+strconv.Itoa(i%4), "u"), callID: "w" + strconv.Itoa(i), key: "w" + strconv.Itoa(i)}
		if code := e.write(t, o); code != guard.CodeOK {
			t.Fatalf("write %d: %s", i, code)
		}
	}
	fresh := func(what string) *idem.Store {
		s, err := idem.New(rdb, idem.Options{Prefix: e.prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	// refused checks that the running store still refuses once it checks
	// again (a call a second after its last refusal), and that a store
	// started afresh refuses too.
	refused := func(what string) {
		t.Helper()
		time.Sleep(1100 * time.Millisecond)
		o := op{p: alice, callID: "probe-" + what, key: "probe-" + what}
		if code := e.write(t, o); code != guard.CodeUnavailable {
			t.Fatalf("%s: the store that noticed answered %s, want UNAVAILABLE", what, code)
		}
		if err := fresh(what).Check(ctx); !errors.Is(err, idem.ErrEvicted) {
			t.Fatalf("%s: a store started afresh: Check %v, want ErrEvicted", what, err)
		}
	}
	markerHolds := func(what string) {
		t.Helper()
		m := rdb.HGetAll(ctx, marker).Val()
		if m["evicted"] == "" {
			t.Fatalf("%s: the marker %v says no eviction", what, m)
		}
	}

	configSet(t, rdb, "maxmemory-policy", "allkeys-lru")
	fill(t, rdb, false, 100)
	if !redistest.WaitUntil(10*time.Second, func() bool { return strings.Contains(e.logs.String(), "evicted keys") }) {
		t.Fatal("the store did not notice the eviction")
	}
	// The marker evicted while the policy still evicts: written back.
	rdb.Del(ctx, marker)
	refused("marker gone, policy evicting")
	markerHolds("after the refusing store's check")

	configSet(t, rdb, "maxmemory-policy", "noeviction")
	refused("noeviction restored, the server full")
	configSet(t, rdb, "maxmemory", "0")
	refused("noeviction restored, with room")
	// The count reset, but not by an acknowledgement: the marker says it.
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	refused("count reset")
	// Count and marker both gone: the store that noticed remembers, and
	// writes the marker back; a store started after that refuses on it.
	rdb.Del(ctx, marker)
	refused("count reset and marker gone")
	markerHolds("after the store that noticed checked")

	r, err := e.store.AckEvictions(ctx, "tester@ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged: %+v", r.Tenants)
	time.Sleep(1100 * time.Millisecond)
	if code := e.write(t, op{p: alice, callID: "after", key: "after"}); code != guard.CodeOK {
		t.Fatalf("after the acknowledgement: %s, want OK", code)
	}
	if err := fresh("acknowledged").Check(ctx); err != nil {
		t.Fatalf("a store started after the acknowledgement: Check %v", err)
	}
}
