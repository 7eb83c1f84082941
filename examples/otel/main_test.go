package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runExample runs the example offline and returns what it printed.
func runExample(t *testing.T, asJSON bool) string {
	t.Helper()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, asJSON); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	// No principal ids in spans or logs (the audit keeps them).
	if strings.Contains(s, "tenant-a") || strings.Contains(s, "user-1") {
		t.Errorf("output names the principal:\n%s", s)
	}
	for _, want := range []string{
		"assistant: Confirmed: the refund draft exists; nothing was created twice.",
		"drafts:    1 created downstream",
		"audit:     4 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	return s
}

// sameLines stops the test unless got is want, line for line.
func sameLines(t *testing.T, what string, got, want []string, output string) {
	t.Helper()
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Fatalf("%s:\n%s\nwant:\n%s\noutput:\n%s", what, g, w, output)
	}
}

// TestOtelExample checks the default, readable output: a span tree with the
// right nesting, real start times and durations and the key attributes; the
// log records as text lines; the metrics grouped; all of it on a screen.
func TestOtelExample(t *testing.T) {
	started := time.Now()
	s := runExample(t, false)

	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > 60 || len(s) > 8000 {
		t.Errorf("output is %d lines, %d bytes; want it to fit on a screen:\n%s", len(lines), len(s), s)
	}
	if strings.Contains(s, "\n{") {
		t.Errorf("raw JSON in the default output:\n%s", s)
	}

	// The tree: the indented names, then duration, start, attributes.
	var tree []string
	var treeLines []string
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "spans:     9,"):
			in = true
			continue
		case !strings.HasPrefix(l, "  "):
			in = false
		}
		if in {
			rest := strings.TrimLeft(l[2:], " │├└─")
			name, _, _ := strings.Cut(rest, "  ")
			tree = append(tree, l[2:len(l)-len(rest)]+name)
			treeLines = append(treeLines, l)
		}
	}
	want := []string{
		"invoke_agent refund-agent",
		"├─ chat scripted-model",
		"│  └─ execute_tool get_order",
		"├─ chat scripted-model",
		"│  ├─ execute_tool create_refund_draft",
		"│  └─ execute_tool create_refund_draft",
		"├─ chat scripted-model",
		"│  └─ execute_tool query_operation_status",
		"└─ chat scripted-model",
	}
	sameLines(t, "span tree", tree, want, s)
	for i, part := range []string{
		"status=completed turns=4 run=run_",
		"response=resp_0001 tokens_in=",
		"code=OK delivery=fresh effect=read call=call_",
		"",
		"ERROR code=APPROVAL_REQUIRED delivery=fresh effect=write",
		"ERROR code=OUTCOME_UNKNOWN delivery=fresh effect=write",
		"",
		"code=OK delivery=receipt_reconciled call=call_",
		"",
	} {
		if !strings.Contains(treeLines[i], part) {
			t.Errorf("span line %q lacks %q", treeLines[i], part)
		}
	}
	// The root's start is a wall-clock time of this run, and every span
	// has a duration.
	root := regexp.MustCompile(`(\d\d:\d\d:\d\d\.\d\d\d)  `).FindStringSubmatch(treeLines[0])
	if root == nil {
		t.Fatalf("root span line %q has no start time", treeLines[0])
	}
	at, _ := time.ParseInLocation("15:04:05.000", root[1], time.Local)
	now := started.In(time.Local)
	at = time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.Local)
	if d := at.Sub(now); d < -2*time.Second || d > time.Minute {
		t.Errorf("root span starts at %s, the run at %s", root[1], now.Format("15:04:05.000"))
	}
	for _, l := range treeLines {
		if f := strings.Fields(l[len(l)-len(strings.TrimLeft(l, " │├└─")):]); len(f) < 3 || f[2] == "0s" {
			t.Errorf("span line %q has no duration", l)
		}
	}

	for _, want := range []string{
		`log:       level=WARN msg="toolguard dispatch" tool=create_refund_draft effect=write call_id=call_`,
		`code=OUTCOME_UNKNOWN delivery=fresh recovery=query_status`,
		`log:       level=DEBUG msg="toolguard query_status" tool=query_operation_status`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	for _, re := range []string{
		`\n  toolguard\.side_effects\n    tool=create_refund_draft delivery=receipt_reconciled +1\n`,
		`\n  toolguard\.unknown_outcomes\.pending\n    \(all\) +0\n`,
		`\n    tool=get_order code=OK delivery=fresh effect=read +1, mean \d`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("metrics do not match %q:\n%s", re, s)
		}
	}
}

// TestOtelExampleJSON checks -json: the exporter's span objects, one a line,
// nested run → model turn → tool call, with real timestamps.
func TestOtelExampleJSON(t *testing.T) {
	s := runExample(t, true)

	type span struct {
		Name               string
		SpanContext        struct{ SpanID string }
		Parent             struct{ SpanID string }
		StartTime, EndTime time.Time
		Attributes         []struct {
			Key   string
			Value struct{ Value any }
		}
		Status struct{ Code string }
	}
	var spans []span
	logs := 0
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, `{"Name":`):
			var sp span
			if err := json.Unmarshal([]byte(line), &sp); err != nil {
				t.Fatalf("span line %q: %v", line, err)
			}
			spans = append(spans, sp)
		case strings.HasPrefix(line, `{"time":`):
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil || rec["trace_id"] == nil {
				t.Errorf("log line %q: %v", line, err)
			}
			logs++
		}
	}
	if logs != 4 {
		t.Errorf("%d JSON log records, want 4 (3 dispatches, 1 status query)", logs)
	}
	attr := func(sp span, k string) any {
		for _, a := range sp.Attributes {
			if a.Key == k {
				return a.Value.Value
			}
		}
		return nil
	}
	var got []string
	var tools, turns []span
	var root span
	for _, sp := range spans {
		if sp.StartTime.Year() < 2000 || sp.EndTime.Before(sp.StartTime) {
			t.Errorf("span %q from %s to %s", sp.Name, sp.StartTime, sp.EndTime)
		}
		switch {
		case strings.HasPrefix(sp.Name, "execute_tool "):
			tools = append(tools, sp)
			code, _ := attr(sp, "toolguard.code").(string)
			delivery, _ := attr(sp, "toolguard.delivery").(string)
			got = append(got, sp.Name+" "+code+" "+delivery)
		case strings.HasPrefix(sp.Name, "chat "):
			turns = append(turns, sp)
		case sp.Name == "invoke_agent refund-agent":
			root = sp
		}
	}
	want := []string{
		"execute_tool get_order OK fresh",
		"execute_tool create_refund_draft APPROVAL_REQUIRED fresh",
		"execute_tool create_refund_draft OUTCOME_UNKNOWN fresh",
		"execute_tool query_operation_status OK receipt_reconciled",
	}
	sameLines(t, "tool spans", got, want, s)
	if len(turns) != 4 || root.SpanContext.SpanID == "" {
		t.Fatalf("%d turn spans and run span %q; want 4 and one", len(turns), root.Name)
	}
	turnIDs := map[string]bool{}
	for _, sp := range turns {
		turnIDs[sp.SpanContext.SpanID] = true
		if sp.Parent.SpanID != root.SpanContext.SpanID || attr(sp, "gen_ai.operation.name") != "chat" {
			t.Errorf("turn span %q is not a chat child of the run's span", sp.Name)
		}
	}
	for _, sp := range tools {
		if !turnIDs[sp.Parent.SpanID] {
			t.Errorf("span %q is not a child of a model turn's span", sp.Name)
		}
		if attr(sp, "gen_ai.operation.name") != "execute_tool" || attr(sp, "gen_ai.tool.call.id") == nil {
			t.Errorf("span %q lacks the GenAI attributes", sp.Name)
		}
	}
	if tools[2].Status.Code != "Error" || attr(tools[2], "error.type") != "OUTCOME_UNKNOWN" {
		t.Errorf("unknown outcome span: status %s, error.type %v", tools[2].Status.Code, attr(tools[2], "error.type"))
	}
}
