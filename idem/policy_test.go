package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// syncBuffer is a log sink for the store's background checks.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watched is a store that checks its server again every checkEvery, with its
// log and its refusal metric, and a rig that writes through it.
type watched struct {
	t      *testing.T
	r      *rig
	logs   *syncBuffer
	reader *sdkmetric.ManualReader
	n      int
}

func newWatched(t *testing.T, rdb redis.UniversalClient, replicas int, checkEvery time.Duration) *watched {
	t.Helper()
	w := &watched{t: t, logs: &syncBuffer{}, reader: sdkmetric.NewManualReader()}
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Replicas: replicas, CheckEvery: checkEvery,
		Logger:        slog.New(slog.NewTextHandler(w.logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.r = newRig(t, s)
	return w
}

// write dispatches one new write and returns it with its answer's code.
func (w *watched) write() (op, guard.Code) {
	w.n++
	o := op{p: alice, callID: "c" + strconv.Itoa(w.n), key: "k" + strconv.Itoa(w.n)}
	return o, w.r.dispatch(w.t, context.Background(), o).Code
}

// until dispatches writes until one answers want (at most 500, 10 ms
// apart), and returns how many answered otherwise first.
func (w *watched) until(want guard.Code) int {
	w.t.Helper()
	for i := range 500 {
		if _, code := w.write(); code == want {
			return i
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatalf("no write answered %s in 500 tries", want)
	return 0
}

// TestPolicyChangedWhileRunning: an eviction policy set after the store
// started (CONFIG SET a minute later) is noticed by the first reservation
// after it (the fence reads the policy in the script): from then on every
// write is refused, UNAVAILABLE, and none runs, as at start; a log line
// and the refusal metric say why. Restored, the server is accepted again.
func TestPolicyChangedWhileRunning(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portPolicy, "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portPolicy)})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	w := newWatched(t, rdb, 0, time.Hour) // only the fence can notice
	if _, code := w.write(); code != guard.CodeOK {
		t.Fatalf("first write: %s", code)
	}

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	accepted := w.until(guard.CodeUnavailable)
	for i := range 5 {
		o, code := w.write()
		if code != guard.CodeUnavailable {
			t.Fatalf("write %d after the refusal: %s, want UNAVAILABLE", i, code)
		}
		if runs, _ := w.r.led.count(o); runs != 0 {
			t.Fatalf("write %d ran on a refused server", i)
		}
	}
	if accepted != 0 {
		t.Fatalf("%d writes were accepted after the CONFIG SET, want 0", accepted)
	}
	if !strings.Contains(w.logs.String(), "maxmemory-policy allows eviction") || !strings.Contains(w.logs.String(), "reason=eviction_policy") {
		t.Fatalf("no log line says why:\n%s", w.logs.String())
	}
	if got := refusals(t, w.reader, "eviction_policy"); got != 1 {
		t.Fatalf("%s = %d, want 1", idem.MetricStoreRefusals, got)
	}

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	w.until(guard.CodeOK)
	if !strings.Contains(w.logs.String(), "accepted again") {
		t.Fatalf("no log line says the server is accepted again:\n%s", w.logs.String())
	}
}

// refusals reads the refusal counter's total with the reason.
func refusals(t *testing.T, reader *sdkmetric.ManualReader, reason string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != idem.MetricStoreRefusals {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := dp.Attributes.Value("reason"); ok && v.AsString() == reason {
					total += dp.Value
				}
			}
		}
	}
	return total
}

// TestReplicasLostWhileRunning: with Options.Replicas 1, a master whose
// replica goes away while the store runs (REPLICAOF NO ONE on it) is
// refused from the store's next check, with the log line and metric
// naming too_few_replicas; with the replica back, writes run again.
func TestReplicasLostWhileRunning(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portPolicy+1, "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	redistest.StartServer(t, t.TempDir(), portPolicy+2, "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(portPolicy+1))
	mc := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portPolicy+1)})
	rc := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", portPolicy+2)})
	t.Cleanup(func() { _ = mc.Close(); _ = rc.Close() })
	linked := func() bool { return infoHas(rc, "master_link_status:up") && infoHas(mc, "connected_slaves:1") }
	if !redistest.WaitUntil(10*time.Second, linked) {
		t.Fatal("the replica never linked to the master")
	}
	ctx := context.Background()
	w := newWatched(t, mc, 1, 20*time.Millisecond)
	w.until(guard.CodeOK)
	if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	// Writes are UNAVAILABLE at once (WAIT finds no replica); the checks
	// that calls set off refuse the master, and say why.
	w.until(guard.CodeUnavailable)
	if !redistest.WaitUntil(10*time.Second, func() bool {
		w.until(guard.CodeUnavailable)
		return strings.Contains(w.logs.String(), "reason=too_few_replicas")
	}) {
		t.Fatalf("no log line names too_few_replicas:\n%s", w.logs.String())
	}
	if got := refusals(t, w.reader, "too_few_replicas"); got != 1 {
		t.Fatalf("%s{reason=too_few_replicas} = %d, want 1", idem.MetricStoreRefusals, got)
	}
	if err := rc.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(portPolicy+1)).Err(); err != nil {
		t.Fatal(err)
	}
	if !redistest.WaitUntil(10*time.Second, linked) {
		t.Fatal("the replica never linked again")
	}
	w.until(guard.CodeOK)
}
