package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spanAttrs are the attributes the span tree shows, in this order, with
// their short labels. The rest are in -json.
var spanAttrs = []struct{ key, label string }{
	{"toolguard.code", "code"},
	{"toolguard.delivery", "delivery"},
	{"toolguard.tool.effect", "effect"},
	{"gen_ai.tool.call.id", "call"},
	{"toolguard.operation.id", "op"},
	{"gen_ai.response.id", "response"},
	{"gen_ai.usage.input_tokens", "tokens_in"},
	{"gen_ai.usage.output_tokens", "tokens_out"},
	{"toolguard.run.status", "status"},
	{"toolguard.run.turns", "turns"},
	{"gen_ai.conversation.id", "run"},
}

// printSpanTree prints the spans as a tree, a span per line: its name, its
// duration, when it started (the root's wall-clock time, the others' offset
// from the root) and its key attributes. Children are in start order.
func printSpanTree(w io.Writer, spans []sdktrace.ReadOnlySpan) {
	byID := map[string]bool{}
	children := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID().String(); s.Parent().IsValid() && byID[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }
	slices.SortFunc(roots, byStart)
	for _, c := range children {
		slices.SortFunc(c, byStart)
	}

	// The name column is as wide as the widest indented name.
	width := 0
	var measure func(s sdktrace.ReadOnlySpan, depth int)
	measure = func(s sdktrace.ReadOnlySpan, depth int) {
		width = max(width, 3*depth+len(s.Name()))
		for _, c := range children[s.SpanContext().SpanID().String()] {
			measure(c, depth+1)
		}
	}
	for _, r := range roots {
		measure(r, 0)
	}

	fmt.Fprintf(w, "spans:     %d, as a tree (go run ./examples/otel -json for every attribute)\n", len(spans))
	for _, root := range roots {
		var walk func(s sdktrace.ReadOnlySpan, indent, branch string)
		walk = func(s sdktrace.ReadOnlySpan, indent, branch string) {
			when := s.StartTime().Format("15:04:05.000")
			if s != root {
				when = "+" + roundDuration(s.StartTime().Sub(root.StartTime())).String()
			}
			name := indent + branch + s.Name()
			fmt.Fprintf(w, "  %-*s %9s %13s  %s\n", width, name, roundDuration(s.EndTime().Sub(s.StartTime())), when, spanSummary(s))
			kids := children[s.SpanContext().SpanID().String()]
			next := indent
			switch branch {
			case "├─ ":
				next += "│  "
			case "└─ ":
				next += "   "
			}
			for i, c := range kids {
				b := "├─ "
				if i == len(kids)-1 {
					b = "└─ "
				}
				walk(c, next, b)
			}
		}
		walk(root, "", "")
	}
}

// spanSummary is a span's key attributes, label=value, and ERROR first when
// its status is an error.
func spanSummary(s sdktrace.ReadOnlySpan) string {
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	var parts []string
	if s.Status().Code == codes.Error {
		parts = append(parts, "ERROR")
	}
	for _, a := range spanAttrs {
		if v, ok := attrs[attribute.Key(a.key)]; ok {
			parts = append(parts, a.label+"="+shortID(v.Emit()))
		}
	}
	return strings.Join(parts, " ")
}

// shortID abbreviates an operation id, "op_" and 32 hex digits, to its
// first 8 digits and an ellipsis, enough to tell a run's operations apart.
// -json prints them whole.
func shortID(s string) string {
	if strings.HasPrefix(s, "op_") && len(s) > 11 {
		return s[:11] + "…"
	}
	return s
}

// roundDuration rounds d for reading: to 10µs under a millisecond, else to
// 0.1ms.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// logHandler returns the example's slog handler: text records, each line
// prefixed "log:", without the time (the span tree has it) or the trace
// and span ids (in -json), durations rounded.
func logHandler(w io.Writer) slog.Handler {
	return slog.NewTextHandler(&prefixWriter{w: w, prefix: "log:       "}, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch {
			case len(groups) > 0:
				return a
			case a.Key == slog.TimeKey, a.Key == "trace_id", a.Key == "span_id":
				return slog.Attr{}
			case a.Key == "operation_id":
				return slog.String(a.Key, shortID(a.Value.String()))
			case a.Value.Kind() == slog.KindDuration:
				return slog.Duration(a.Key, roundDuration(a.Value.Duration()))
			}
			return a
		},
	})
}

// prefixWriter writes each line it is given with a prefix. slog's handlers
// write one whole record per Write.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// printMetrics prints the run's metrics grouped by name: a line per series
// with its attributes (short names) and its value; histograms as count and
// mean.
func printMetrics(ctx context.Context, w io.Writer, reader interface {
	Collect(context.Context, *metricdata.ResourceMetrics) error
}) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	type series struct{ name, attrs, value string }
	var rows []series
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					rows = append(rows, series{m.Name, metricAttrs(p.Attributes), fmt.Sprint(p.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					mean := time.Duration(p.Sum / float64(max(p.Count, 1)) * float64(time.Second))
					rows = append(rows, series{m.Name, metricAttrs(p.Attributes),
						fmt.Sprintf("%d, mean %s", p.Count, roundDuration(mean))})
				}
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].name != rows[j].name {
			return rows[i].name < rows[j].name
		}
		return rows[i].attrs < rows[j].attrs
	})
	fmt.Fprintln(w, "metrics:")
	width := 0
	for _, r := range rows {
		width = max(width, len(r.attrs))
	}
	last := ""
	for _, r := range rows {
		if r.name != last {
			fmt.Fprintf(w, "  %s\n", r.name)
			last = r.name
		}
		attrs := r.attrs
		if attrs == "" {
			attrs = "(all)"
		}
		fmt.Fprintf(w, "    %-*s  %s\n", width, attrs, r.value)
	}
	return nil
}

// metricAttrs renders a series' attributes as short name=value pairs:
// gen_ai.tool.name as tool, the others by their last name segment.
func metricAttrs(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		k := string(kv.Key)
		if k == "gen_ai.tool.name" {
			k = "tool"
		} else if i := strings.LastIndexByte(k, '.'); i >= 0 {
			k = k[i+1:]
		}
		parts = append(parts, k+"="+kv.Value.Emit())
	}
	return strings.Join(parts, " ")
}
