package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestOtelExample(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()

	// The spans, one JSON object a line.
	type span struct {
		Name        string
		SpanContext struct{ SpanID string }
		Parent      struct{ SpanID string }
		Attributes  []struct {
			Key   string
			Value struct{ Value any }
		}
		Status struct{ Code string }
	}
	var spans []span
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, `{"Name":`) {
			var sp span
			if err := json.Unmarshal([]byte(line), &sp); err != nil {
				t.Fatalf("span line %q: %v", line, err)
			}
			spans = append(spans, sp)
		}
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
		switch {
		case strings.HasPrefix(sp.Name, "execute_tool "):
			tools = append(tools, sp)
			got = append(got, sp.Name+" "+toString(attr(sp, "toolguard.code"))+" "+toString(attr(sp, "toolguard.delivery")))
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
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tool spans:\n%s\nwant:\n%s\noutput:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), s)
	}
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
	spans = tools
	if spans[2].Status.Code != "Error" || attr(spans[2], "error.type") != "OUTCOME_UNKNOWN" {
		t.Errorf("unknown outcome span: status %s, error.type %v", spans[2].Status.Code, attr(spans[2], "error.type"))
	}

	for _, want := range []string{
		`level=WARN msg="toolguard dispatch" tool=create_refund_draft effect=write call_id=call_`,
		`code=OUTCOME_UNKNOWN delivery=fresh recovery=query_status`,
		`level=DEBUG msg="toolguard query_status" tool=query_operation_status`,
		"metric:    toolguard.side_effects{gen_ai.tool.name=create_refund_draft,toolguard.delivery=receipt_reconciled} 1",
		"metric:    toolguard.unknown_outcomes.pending{} 0",
		"assistant: Confirmed: the refund draft exists; nothing was created twice.",
		"drafts:    1 created downstream",
		"audit:     4 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// No principal ids in spans or logs (the audit keeps them).
	if strings.Contains(s, "tenant-a") || strings.Contains(s, "user-1") {
		t.Errorf("output names the principal:\n%s", s)
	}
}

func toString(v any) string {
	if v == nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

func TestOtelExamplePretty(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\t\"Name\": \"execute_tool get_order\"") {
		t.Errorf("pretty output:\n%s", out.String())
	}
}
