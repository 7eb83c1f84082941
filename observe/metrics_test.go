package observe_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/observe"
)

// collected is one collection of a ManualReader: per metric name, per
// attribute set (its encoding), the summed value (count for histograms).
type collected map[string]map[string]float64

func collect(t *testing.T, r *sdkmetric.ManualReader) (collected, metricdata.ResourceMetrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != observe.InstrumentationName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[enc(p.Attributes)] += float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[enc(p.Attributes)] += float64(p.Count)
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = pts
		}
	}
	return out, rm
}

// enc writes an attribute set as "k=v,k=v" sorted by key.
func enc(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (c collected) want(t *testing.T, metric, attrs string, v float64) {
	t.Helper()
	if got := c[metric][attrs]; got != v {
		t.Errorf("%s{%s} = %v, want %v; all: %v", metric, attrs, got, v, c[metric])
	}
}

func (c collected) total(metric string) float64 {
	var n float64
	for _, v := range c[metric] {
		n += v
	}
	return n
}

// metricsWorld is a world whose guard records metrics into reader's
// provider, told the tools' effects when withTools.
func metricsWorld(t *testing.T, withTools bool) (*world, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w := newWorld(t, func(tools guard.Tools) guard.Options {
		opts := observe.Options{MeterProvider: mp}
		if withTools {
			opts.Tools = tools
		}
		m, err := observe.Metrics(opts)
		if err != nil {
			t.Fatal(err)
		}
		return guard.Options{Interceptors: []guard.Interceptor{m}}
	})
	return w, reader
}

func TestMetrics(t *testing.T) {
	w, reader := metricsWorld(t, true)
	scenario(t, w)
	c, rm := collect(t, reader)

	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=get,toolguard.code=OK,toolguard.delivery=fresh,toolguard.tool.effect=read", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=get,toolguard.code=OK,toolguard.delivery=local_replay,toolguard.tool.effect=read", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=get,toolguard.code=INVALID_ARGUMENTS,toolguard.delivery=fresh,toolguard.tool.effect=read", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=_OTHER,toolguard.code=UNKNOWN_TOOL,toolguard.delivery=fresh", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=put,toolguard.code=OK,toolguard.delivery=fresh,toolguard.tool.effect=write", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=put,toolguard.code=IDEMPOTENCY_CONFLICT,toolguard.delivery=fresh,toolguard.tool.effect=write", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=put,toolguard.code=OUTCOME_UNKNOWN,toolguard.delivery=fresh,toolguard.tool.effect=write", 2)
	if n := c.total(observe.MetricDispatches); n != 8 {
		t.Errorf("%v dispatches, want 8", n)
	}
	if n := c.total(observe.MetricDispatchDuration); n != 8 {
		t.Errorf("%v dispatch durations, want 8", n)
	}
	c.want(t, observe.MetricStatusQueries, "gen_ai.tool.name=query_operation_status,toolguard.code=OK,toolguard.delivery=receipt_reconciled", 1)
	c.want(t, observe.MetricStatusQueries, "gen_ai.tool.name=query_operation_status,toolguard.code=OK,toolguard.delivery=local_replay", 1)
	if n := c.total(observe.MetricStatusQueryDuration); n != 2 {
		t.Errorf("%v status durations, want 2", n)
	}
	// Side effects: the OK fresh write, and the unknown one once settled.
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=put,toolguard.delivery=fresh,toolguard.tool.effect=write", 1)
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=put,toolguard.delivery=receipt_reconciled", 1)
	if n := c.total(observe.MetricSideEffects); n != 2 {
		t.Errorf("%v side effects, want 2 (the read is not one)", n)
	}
	if w.Down.Writes() != 2 {
		t.Errorf("downstream made %d writes; the metric says 2", w.Down.Writes())
	}
	c.want(t, observe.MetricReplays, "gen_ai.tool.name=get,toolguard.code=OK", 1)
	c.want(t, observe.MetricConflicts, "gen_ai.tool.name=put,toolguard.code=IDEMPOTENCY_CONFLICT", 1)
	c.want(t, observe.MetricUnknownOutcomes, "gen_ai.tool.name=put,toolguard.action=dispatch", 2)
	// Counted once for the dispatch and its retry, settled by the query.
	c.want(t, observe.MetricUnknownPending, "", 0)
	c.want(t, observe.MetricHostErrors, "toolguard.action=dispatch", 1)

	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if strings.HasSuffix(m.Name, ".duration") && m.Unit != "s" {
				t.Errorf("%s unit %q, want s", m.Name, m.Unit)
			}
		}
	}
	assertNoSecretsInMetrics(t, c)
}

func assertNoSecretsInMetrics(t *testing.T, c collected) {
	t.Helper()
	for name, pts := range c {
		for attrs := range pts {
			if strings.Contains(attrs, secret) {
				t.Errorf("metric %s leaks %q", name, attrs)
			}
		}
	}
}

func TestMetricsPendingUnknowns(t *testing.T) {
	w, reader := metricsWorld(t, true)
	pending := func() float64 {
		c, _ := collect(t, reader)
		return c[observe.MetricUnknownPending][""]
	}
	p := principal
	// Two unknown writes; the downstream keeps their receipts.
	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	a := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "ca"})
	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	b := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"1"}`, CallID: "cb"})
	guardtest.Want(t, a, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	guardtest.Want(t, b, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if n := pending(); n != 2 {
		t.Fatalf("pending %v, want 2", n)
	}
	// A retry of the same call, and a status query while the receipt
	// lookup fails: still the same two operations.
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "ca"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	w.Down.FailNext(0, false)
	guardtest.Want(t, w.Status(t, p, a.OperationID), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if n := pending(); n != 2 {
		t.Fatalf("pending %v after a retry and an inconclusive query, want 2", n)
	}
	// Receipts come back: both settle.
	w.Down.FailNext(0, true)
	guardtest.Want(t, w.Status(t, p, a.OperationID), guard.CodeOK, guard.DeliveryReceiptReconciled)
	if n := pending(); n != 1 {
		t.Fatalf("pending %v, want 1", n)
	}
	guardtest.Want(t, w.Status(t, p, b.OperationID), guard.CodeOK, guard.DeliveryReceiptReconciled)
	guardtest.Want(t, w.Status(t, p, b.OperationID), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := pending(); n != 0 {
		t.Fatalf("pending %v, want 0", n)
	}

	// A holder whose lease runs out: a status query sees the write unknown
	// first (+1); then the holder commits late after all (-1).
	entered, release := w.Down.Block()
	done := make(chan *guard.Result)
	go func() {
		done <- w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"c","value":"1"}`, CallID: "cc"})
	}()
	<-entered
	w.Advance(2 * guardtest.Lease)
	w.Down.FailNext(0, false) // the receipt lookup fails
	guardtest.Want(t, w.Status(t, p, "cc"), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	if n := pending(); n != 1 {
		t.Fatalf("pending %v after a lease ran out, want 1", n)
	}
	release()
	guardtest.Want(t, <-done, guard.CodeOK, guard.DeliveryFresh)
	if n := pending(); n != 0 {
		t.Fatalf("pending %v after the late commit, want 0", n)
	}
	c, _ := collect(t, reader)
	// This process never saw cc's dispatch end: its tool is not known to the
	// status query.
	c.want(t, observe.MetricUnknownOutcomes, "gen_ai.tool.name=_OTHER,toolguard.action=query_status", 1)
	c.want(t, observe.MetricUnknownOutcomes, "gen_ai.tool.name=put,toolguard.action=query_status", 1)
	c.want(t, observe.MetricUnknownOutcomes, "gen_ai.tool.name=put,toolguard.action=dispatch", 3)
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=put,toolguard.delivery=receipt_reconciled", 2)
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=put,toolguard.delivery=fresh,toolguard.tool.effect=write", 1)
}

// Without Options.Tools the effect of a tool is unknown: every OK fresh
// dispatch counts as a side effect, and unknown tools are known only from
// their code.
func TestMetricsWithoutTools(t *testing.T) {
	w, reader := metricsWorld(t, false)
	scenario(t, w)
	c, _ := collect(t, reader)
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=get,toolguard.delivery=fresh", 1)
	c.want(t, observe.MetricSideEffects, "gen_ai.tool.name=put,toolguard.delivery=fresh", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=_OTHER,toolguard.code=UNKNOWN_TOOL,toolguard.delivery=fresh", 1)
	c.want(t, observe.MetricDispatches, "gen_ai.tool.name=put,toolguard.code=OK,toolguard.delivery=fresh", 1)
	assertNoSecretsInMetrics(t, c)
}
