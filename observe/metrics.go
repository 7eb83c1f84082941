package observe

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolguard/toolguard/guard"
)

// The metric names.
const (
	metricDispatches          = "toolguard.dispatches"               // counter {dispatch}: tool, code, delivery[, effect]
	metricDispatchDuration    = "toolguard.dispatch.duration"        // histogram, s: tool, code, delivery[, effect]
	metricStatusQueries       = "toolguard.status_queries"           // counter {query}: tool (the status tool), code, delivery
	metricStatusQueryDuration = "toolguard.status_query.duration"    // histogram, s: tool, code, delivery
	metricSideEffects         = "toolguard.side_effects"             // counter {effect}: tool, delivery[, effect]
	metricReplays             = "toolguard.replays"                  // counter {dispatch}: tool, code
	metricConflicts           = "toolguard.conflicts"                // counter {dispatch}: tool, code
	metricUnknownOutcomes     = "toolguard.unknown_outcomes"         // counter {result}: tool, action
	metricUnknownPending      = "toolguard.unknown_outcomes.pending" // up-down counter {operation}
	metricHostErrors          = "toolguard.host_errors"              // counter {call}: action
)

// durationBuckets are the histogram boundaries in seconds: a read takes
// milliseconds, a write may hold its lease (30 s by default).
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// pendingCapacity bounds the operations Metrics remembers as pending.
const pendingCapacity = 100_000

type instruments struct {
	dispatches, statusQueries, sideEffects, replays, conflicts, unknowns, hostErrors metric.Int64Counter
	dispatchDuration, statusDuration                                                 metric.Float64Histogram
	pending                                                                          metric.Int64UpDownCounter
}

// Metrics returns an interceptor that records the guard's metrics through the
// OpenTelemetry metrics API (the Metric constants):
//
//   - toolguard.dispatches and toolguard.dispatch.duration (seconds, the
//     process's monotonic clock, not the guard's Clock) per tool, code and
//     delivery; toolguard.status_queries and its duration likewise;
//   - toolguard.side_effects: dispatches answered OK fresh of a write tool,
//     and status queries answered receipt_reconciled — the results whose
//     audit record says side_effect yes. Without Options.Tools the effect of a
//     tool is not known and every OK fresh dispatch is counted, reads too
//     (with toolguard.tool.effect absent);
//   - toolguard.replays (local_replay dispatches), toolguard.conflicts (both
//     conflict codes, fresh), toolguard.unknown_outcomes (every
//     OUTCOME_UNKNOWN result, dispatch or status query);
//   - toolguard.unknown_outcomes.pending: +1 when an operation is first seen
//     OUTCOME_UNKNOWN (by a dispatch or a status query), -1 when a status
//     query settles one (receipt_reconciled) or its write commits late. It
//     is per process: see docs/operations.md;
//   - toolguard.host_errors: dispatches and queries that returned an error
//     to the host (a programming error such as an invalid principal).
//
// A nil Options.MeterProvider means otel.GetMeterProvider().
func Metrics(o Options) (guard.Interceptor, error) {
	s := settingsOf(o)
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	var in instruments
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	in.dispatches = counter(metricDispatches, "{dispatch}", "Tool calls dispatched through the guard, by tool, code and delivery.")
	in.dispatchDuration = histogram(metricDispatchDuration, "Duration of a dispatch through the guard, checks, store and execution included.")
	in.statusQueries = counter(metricStatusQueries, "{query}", "Status queries answered by the guard, by code and delivery.")
	in.statusDuration = histogram(metricStatusQueryDuration, "Duration of a status query, receipt lookup included.")
	in.sideEffects = counter(metricSideEffects, "{effect}", "Side effects known to have happened: OK fresh writes and receipt-reconciled operations.")
	in.replays = counter(metricReplays, "{dispatch}", "Dispatches answered with a stored result (local_replay), without executing.")
	in.conflicts = counter(metricConflicts, "{dispatch}", "Dispatches refused as IDEMPOTENCY_CONFLICT or CALL_ID_CONFLICT.")
	in.unknowns = counter(metricUnknownOutcomes, "{result}", "OUTCOME_UNKNOWN results, from dispatches and status queries.")
	in.hostErrors = counter(metricHostErrors, "{call}", "Dispatches and status queries that returned an error to the host.")
	var err error
	in.pending, err = m.Int64UpDownCounter(metricUnknownPending, metric.WithUnit("{operation}"),
		metric.WithDescription("Operations seen with an unknown outcome by this process and not yet settled by a status query."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pend := newPendingSet(pendingCapacity)

	dispatch := func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, call *guard.Call) (*guard.Result, error) {
			start := time.Now()
			res, err := next(ctx, call)
			elapsed := time.Since(start).Seconds()
			if err != nil || res == nil {
				in.hostErrors.Add(ctx, 1, metric.WithAttributes(keyAction.String("dispatch")))
				return res, err
			}
			ref := s.tool(call.Proposal.Name)
			ref.settle(call.Proposal.Name, res)
			tool := keyToolName.String(ref.label)
			code := keyCode.String(res.Code.String())
			delivery := keyDelivery.String(string(deliveryOf(res)))
			attrs := []attribute.KeyValue{tool, code, delivery}
			if ref.effect != "" {
				attrs = append(attrs, keyEffect.String(ref.effect))
			}
			set := metric.WithAttributeSet(attribute.NewSet(attrs...))
			in.dispatches.Add(ctx, 1, set)
			in.dispatchDuration.Record(ctx, elapsed, set)
			switch decision(res) {
			case decisionReplay:
				in.replays.Add(ctx, 1, metric.WithAttributes(tool, code))
			case decisionConflict:
				in.conflicts.Add(ctx, 1, metric.WithAttributes(tool, code))
			case decisionUnknown:
				in.unknowns.Add(ctx, 1, metric.WithAttributes(tool, keyAction.String("dispatch")))
				op := res.OperationID
				if op == "" {
					op = operationID(call)
				}
				if pend.add(opKey(call.Principal, op), ref.label) {
					in.pending.Add(ctx, 1)
				}
			case decisionFresh:
				if res.Code == guard.CodeOK && ref.effect != "read" {
					if _, ok := pend.remove(opKey(call.Principal, operationID(call))); ok {
						// A write whose lease ran out (and which a status
						// query saw unknown) committed late after all.
						in.pending.Add(ctx, -1)
					}
					if ref.effect != "" {
						in.sideEffects.Add(ctx, 1, metric.WithAttributes(tool, delivery, keyEffect.String(ref.effect)))
					} else {
						in.sideEffects.Add(ctx, 1, metric.WithAttributes(tool, delivery))
					}
				}
			}
			return res, nil
		}
	}

	statusTool := keyToolName.String(clean(s.statusTool, maxName))
	status := func(next guard.StatusHandler) guard.StatusHandler {
		return func(ctx context.Context, sc *guard.StatusCall) (*guard.Result, error) {
			start := time.Now()
			res, err := next(ctx, sc)
			elapsed := time.Since(start).Seconds()
			if err != nil || res == nil {
				in.hostErrors.Add(ctx, 1, metric.WithAttributes(keyAction.String("query_status")))
				return res, err
			}
			delivery := keyDelivery.String(string(deliveryOf(res)))
			set := metric.WithAttributeSet(attribute.NewSet(statusTool, keyCode.String(res.Code.String()), delivery))
			in.statusQueries.Add(ctx, 1, set)
			in.statusDuration.Record(ctx, elapsed, set)
			// The operation's tool: as this process saw it go unknown, else
			// as the StatusCall names it, else otherTool.
			key := opKey(sc.Principal, sc.OperationID)
			opTool := otherTool
			if sc.Tool != "" {
				opTool = s.tool(sc.Tool).label
			}
			switch decision(res) {
			case decisionReconciled:
				if tool, ok := pend.remove(key); ok {
					opTool = tool
				}
				in.sideEffects.Add(ctx, 1, metric.WithAttributes(keyToolName.String(opTool), delivery))
				in.pending.Add(ctx, -1)
			case decisionUnknown:
				if tool, ok := pend.get(key); ok {
					opTool = tool
				}
				in.unknowns.Add(ctx, 1, metric.WithAttributes(keyToolName.String(opTool), keyAction.String("query_status")))
				if pend.add(key, opTool) {
					in.pending.Add(ctx, 1)
				}
			}
			return res, nil
		}
	}
	return interceptor{dispatch: dispatch, status: status}, nil
}

func deliveryOf(res *guard.Result) guard.Delivery {
	if res.Delivery == "" {
		return guard.DeliveryFresh
	}
	return res.Delivery
}

// pendingSet remembers, by hashed principal and operation id, the
// operations counted as pending and their tools, so that retries and
// repeated status queries of one unknown operation count it once. When full
// it forgets the oldest.
type pendingSet struct {
	mu    sync.Mutex
	cap   int
	gen   uint64
	m     map[[32]byte]pendingValue
	order []pendingEntry // insertion order, oldest first; may hold stale entries
}

type pendingValue struct {
	gen  uint64 // of its insertion
	tool string
}

type pendingEntry struct {
	key [32]byte
	gen uint64
}

func newPendingSet(capacity int) *pendingSet {
	return &pendingSet{cap: capacity, m: map[[32]byte]pendingValue{}}
}

// add reports whether k was not in the set and is now.
func (p *pendingSet) add(k [32]byte, tool string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[k]; ok {
		return false
	}
	for len(p.m) >= p.cap && len(p.order) > 0 {
		e := p.order[0]
		p.order = p.order[1:]
		if v, ok := p.m[e.key]; ok && v.gen == e.gen {
			delete(p.m, e.key)
		}
	}
	if len(p.order) >= 2*p.cap {
		p.compact()
	}
	p.gen++
	p.m[k] = pendingValue{p.gen, tool}
	p.order = append(p.order, pendingEntry{k, p.gen})
	return true
}

// get returns the tool of k, if k is in the set.
func (p *pendingSet) get(k [32]byte) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	return v.tool, ok
}

// remove takes k out of the set and returns its tool, if it was there.
func (p *pendingSet) remove(k [32]byte) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	delete(p.m, k)
	return v.tool, ok
}

// compact drops stale entries from the order.
func (p *pendingSet) compact() {
	kept := make([]pendingEntry, 0, len(p.m))
	for _, e := range p.order {
		if v, ok := p.m[e.key]; ok && v.gen == e.gen {
			kept = append(kept, e)
		}
	}
	p.order = kept
}

func (p *pendingSet) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
