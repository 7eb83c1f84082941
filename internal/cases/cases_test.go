package cases_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/cases/casestest"
	"github.com/toolguard/toolguard/internal/redistest"
)

func testdata(name string) string { return filepath.Join("..", "..", "testdata", name) }

// freshWorld is a world on its own miniredis, closed when the test ends.
func freshWorld(t *testing.T) cases.World {
	t.Helper()
	_, rdb := redistest.Mini(t)
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	return cases.World{Store: s, Close: func() {}}
}

func load(t *testing.T, name string) *cases.File {
	t.Helper()
	f, err := cases.Load(testdata(name))
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return f
}

// TestCaseFiles runs every case of the case files (casestest.Files), each
// in a fresh world on miniredis.
func TestCaseFiles(t *testing.T) {
	casestest.Run(t, testdata(""), freshWorld)
}

// TestExtraCaseIDsDoNotShadowTheSeed keeps the two files' ids apart, so a
// report line names one case.
func TestExtraCaseIDsDoNotShadowTheSeed(t *testing.T) {
	seen := map[string]string{}
	for _, name := range casestest.Files {
		for _, c := range load(t, name).Cases {
			if other, ok := seen[c.ID]; ok {
				t.Errorf("case id %q is in both %s and %s", c.ID, other, name)
			}
			seen[c.ID] = name
		}
	}
}

// ---------------------------------------------------------------------------
// The loader.

// seedDoc returns the seed file as a generic JSON document to mutate.
func seedDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(testdata("tool-cases-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func caseAt(doc map[string]any, id string) map[string]any {
	for _, c := range doc["cases"].([]any) {
		if m := c.(map[string]any); m["id"] == id {
			return m
		}
	}
	panic("no case " + id)
}

func stepAt(c map[string]any, i int) map[string]any {
	return c["steps"].([]any)[i].(map[string]any)
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRejectsMalformedFiles(t *testing.T) {
	const twoSteps = "timeout-after-commit-requires-explicit-status-query"
	tests := []struct {
		name   string
		mutate func(doc map[string]any) []byte // nil result: marshal doc
		want   cases.FormatError               // Problem is not compared
	}{
		{
			name: "missing expected code",
			mutate: func(doc map[string]any) []byte {
				delete(stepAt(caseAt(doc, "unknown-tool"), 0)["expected"].(map[string]any), "code")
				return nil
			},
			want: cases.FormatError{Case: "unknown-tool", Step: "unknown", Field: "expected.code"},
		},
		{
			name: "unknown approval",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, "unapproved-write"), 0)["approval"] = "approved-by-bob"
				return nil
			},
			want: cases.FormatError{Case: "unapproved-write", Step: "write", Field: "approval"},
		},
		{
			name: "status_ref_from names a later step",
			mutate: func(doc map[string]any) []byte {
				c := caseAt(doc, twoSteps)
				steps := c["steps"].([]any)
				steps[0], steps[1] = steps[1], steps[0]
				return nil
			},
			want: cases.FormatError{Case: twoSteps, Step: "query-receipt", Field: "status_ref_from"},
		},
		{
			name: "status_ref_from names the step itself",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, twoSteps), 1)["status_ref_from"] = "query-receipt"
				return nil
			},
			want: cases.FormatError{Case: twoSteps, Step: "query-receipt", Field: "status_ref_from"},
		},
		{
			name: "query_status without status_ref_from",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, twoSteps), 1)["status_ref_from"] = nil
				return nil
			},
			want: cases.FormatError{Case: twoSteps, Step: "query-receipt", Field: "status_ref_from"},
		},
		{
			name: "unknown failure",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, "rate-limit-is-retryable"), 0)["failure"] = "network_partition"
				return nil
			},
			want: cases.FormatError{Case: "rate-limit-is-retryable", Step: "rate-limit", Field: "failure"},
		},
		{
			name: "unknown action",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, "read-own-order"), 0)["action"] = "execute"
				return nil
			},
			want: cases.FormatError{Case: "read-own-order", Step: "read", Field: "action"},
		},
		{
			name: "missing now",
			mutate: func(doc map[string]any) []byte {
				delete(stepAt(caseAt(doc, "read-own-order"), 0), "now")
				return nil
			},
			want: cases.FormatError{Case: "read-own-order", Step: "read", Field: "now"},
		},
		{
			name: "side_effect_count not an integer",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, "read-own-order"), 0)["expected"].(map[string]any)["side_effect_count"] = "none"
				return nil
			},
			want: cases.FormatError{Case: "read-own-order", Step: "read", Field: "expected.side_effect_count"},
		},
		{
			name: "duplicate step ids",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, twoSteps), 1)["step_id"] = "commit-response-lost"
				return nil
			},
			want: cases.FormatError{Case: twoSteps, Step: "commit-response-lost", Field: "step_id"},
		},
		{
			name: "duplicate case ids",
			mutate: func(doc map[string]any) []byte {
				caseAt(doc, "cross-tenant-fails-closed")["id"] = "read-own-order"
				return nil
			},
			want: cases.FormatError{Case: "read-own-order", Field: "id"},
		},
		{
			name: "missing principal",
			mutate: func(doc map[string]any) []byte {
				caseAt(doc, "read-own-order")["principal"].(map[string]any)["tenant_id"] = ""
				return nil
			},
			want: cases.FormatError{Case: "read-own-order", Field: "principal"},
		},
		{
			name: "wrong schema_version",
			mutate: func(doc map[string]any) []byte {
				doc["schema_version"] = "tool-cases-v1"
				return nil
			},
			want: cases.FormatError{Field: "schema_version"},
		},
		{
			name: "unknown member",
			mutate: func(doc map[string]any) []byte {
				stepAt(caseAt(doc, "read-own-order"), 0)["expect"] = map[string]any{"code": "OK"}
				return nil
			},
			want: cases.FormatError{Field: "(json)"},
		},
		{
			name:   "bad JSON",
			mutate: func(doc map[string]any) []byte { return []byte(`{"schema_version": "tool-cases-v2", "cases": [`) },
			want:   cases.FormatError{Field: "(json)"},
		},
		{
			name:   "no cases",
			mutate: func(doc map[string]any) []byte { doc["cases"] = []any{}; return nil },
			want:   cases.FormatError{Field: "cases"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := seedDoc(t)
			b := tt.mutate(doc)
			if b == nil {
				b = marshal(t, doc)
			}
			f, err := cases.Parse(b)
			if err == nil {
				t.Fatalf("Parse accepted the file (%d cases)", len(f.Cases))
			}
			var fe *cases.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *cases.FormatError", err, err)
			}
			if fe.Case != tt.want.Case || fe.Step != tt.want.Step || fe.Field != tt.want.Field {
				t.Errorf("got case %q step %q field %q, want case %q step %q field %q (%v)",
					fe.Case, fe.Step, fe.Field, tt.want.Case, tt.want.Step, tt.want.Field, err)
			}
			msg := err.Error()
			for _, part := range []string{tt.want.Case, tt.want.Step, tt.want.Field} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not name %q", msg, part)
				}
			}
		})
	}
}

// TestParseSection8 checks what the contract's section 1 lets a case file
// carry: an empty tool name (a tool that does not exist), and empty or null
// ids and keys (no id, no key); and that a name that is absent or null is
// still refused.
func TestParseSection8(t *testing.T) {
	f := load(t, "cases-section8.json")
	byID := map[string]*cases.Case{}
	for i := range f.Cases {
		byID[f.Cases[i].ID] = &f.Cases[i]
	}
	empty := byID["section8-empty-tool-name-is-unknown-tool"]
	if empty == nil || empty.Steps[0].Proposal.Name != "" {
		t.Fatalf("empty tool name case missing or name not empty: %+v", empty)
	}
	nullIDs := byID["section8-null-ids-mean-no-ids"].Steps[0].ExecutionContext
	if nullIDs.CallID != "" || nullIDs.OperationID != "" || nullIDs.ResponseID != "" || nullIDs.IdempotencyKey != nil {
		t.Errorf("null ids decoded as %+v, want all empty", nullIDs)
	}

	for _, tt := range []struct {
		name   string
		mutate func(p map[string]any)
		field  string
	}{
		{"absent name", func(p map[string]any) { delete(p, "name") }, "proposal.name"},
		{"null name", func(p map[string]any) { p["name"] = nil }, "proposal.name"},
		{"name not a string", func(p map[string]any) { p["name"] = 7 }, "(json)"},
		{"unknown member in the proposal", func(p map[string]any) { p["tool"] = "get_order" }, "(json)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := seedDoc(t)
			tt.mutate(stepAt(caseAt(doc, "unknown-tool"), 0)["proposal"].(map[string]any))
			_, err := cases.Parse(marshal(t, doc))
			var fe *cases.FormatError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Parse: %v, want a FormatError on field %s", err, tt.field)
			}
		})
	}
}

func TestLoadFromDisk(t *testing.T) {
	if _, err := cases.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(`{"schema_version": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var fe *cases.FormatError
	if _, err := cases.Load(path); !errors.As(err, &fe) {
		t.Errorf("Load of a malformed file: %v, want a *cases.FormatError", err)
	}
	for _, name := range casestest.Files {
		f := load(t, name)
		if f.SchemaVersion != cases.SchemaVersion || len(f.Cases) == 0 {
			t.Errorf("%s: schema %q, %d cases", name, f.SchemaVersion, len(f.Cases))
		}
	}
}

// ---------------------------------------------------------------------------
// The runner must be able to fail.

// runMutated runs the seed case id after mutate changed it, and returns the
// report.
func runMutated(t *testing.T, id string, mutate func(c map[string]any)) *cases.CaseReport {
	t.Helper()
	doc := seedDoc(t)
	c := caseAt(doc, id)
	mutate(c)
	doc["cases"] = []any{c}
	f, err := cases.Parse(marshal(t, doc))
	if err != nil {
		t.Fatalf("mutated case does not parse: %v", err)
	}
	return cases.Run(context.Background(), &f.Cases[0], freshWorld(t))
}

func mismatches(rep *cases.CaseReport) []string {
	var out []string
	for _, s := range rep.Steps {
		for _, m := range s.Mismatch {
			out = append(out, s.StepID+": "+m)
		}
	}
	return out
}

func TestRunnerCanFail(t *testing.T) {
	const id = "approved-write-and-safe-retry"
	tests := []struct {
		name      string
		step      int
		field     string
		value     any
		wantField string // the mismatch must start with this field name
	}{
		{"code", 1, "code", "IDEMPOTENCY_CONFLICT", "code"},
		{"delivery", 1, "delivery", "fresh", "delivery"},
		{"data", 1, "data", map[string]any{"draft_id": "DRAFT-2", "order_ref": "ORDER-7", "reason": "duplicate"}, "data"},
		{"data member order is not enough", 0, "data", map[string]any{"draft_id": "DRAFT-1", "order_ref": "ORDER-7"}, "data"},
		{"side effects", 1, "side_effect_count", 2, "side_effect_count"},
		{"member the result lacks", 0, "operation_id", "op-refund-2", "operation_id"},
		{"null for a member the result has", 0, "data", nil, "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := runMutated(t, id, func(c map[string]any) {
				stepAt(c, tt.step)["expected"].(map[string]any)[tt.field] = tt.value
			})
			if rep.Passed() {
				t.Fatalf("case passed with expected %s = %v", tt.field, tt.value)
			}
			ms := mismatches(rep)
			if len(ms) != 1 {
				t.Errorf("want exactly one mismatch, got %q", ms)
			}
			stepID := stepAt(caseAt(seedDoc(t), id), tt.step)["step_id"].(string)
			for _, m := range ms {
				if !strings.HasPrefix(m, stepID+": "+tt.wantField+" want ") {
					t.Errorf("mismatch %q does not name step %s field %s", m, stepID, tt.wantField)
				}
			}
		})
	}

	t.Run("unchanged seed passes", func(t *testing.T) {
		rep := runMutated(t, id, func(map[string]any) {})
		if !rep.Passed() {
			t.Errorf("unchanged case failed: %q %v", mismatches(rep), rep.Err)
		}
	})
	t.Run("a missing member compares as null", func(t *testing.T) {
		rep := runMutated(t, id, func(c map[string]any) {
			e := stepAt(c, 0)["expected"].(map[string]any)
			e["retry_after_ms"] = nil
			e["operation_id"] = nil
		})
		if !rep.Passed() {
			t.Errorf("null for absent members failed: %q %v", mismatches(rep), rep.Err)
		}
	})
	t.Run("values compare as canonical JSON", func(t *testing.T) {
		rep := runMutated(t, id, func(c map[string]any) {
			// A reordered object is the same value.
			stepAt(c, 0)["expected"].(map[string]any)["data"] = json.RawMessage(
				`{"reason": "duplicate", "order_ref": "ORDER-7", "draft_id": "DRAFT-1"}`)
		})
		if !rep.Passed() {
			t.Errorf("reordered data failed: %q %v", mismatches(rep), rep.Err)
		}
	})
	t.Run("a changed proposal fails", func(t *testing.T) {
		// The runner must really drive the guard: a write without approval
		// cannot match the seed's OK.
		rep := runMutated(t, id, func(c map[string]any) { stepAt(c, 0)["approval"] = "none" })
		if rep.Passed() {
			t.Fatal("case passed without approval")
		}
		if ms := mismatches(rep); len(ms) == 0 || !strings.HasPrefix(ms[0], "first: code want") {
			t.Errorf("mismatches %q do not start with the first step's code", ms)
		}
	})
}

// ---------------------------------------------------------------------------
// Scoping across principals, which one case (one principal) cannot express:
// several cases run one after another on one shared store.

func TestCallIDsAndKeysAreScopedPerTenantAndSubject(t *testing.T) {
	w := freshWorld(t)
	step := func(id, name, args, call, key, approval, want string) string {
		k := "null"
		if key != "" {
			k = `"` + key + `"`
		}
		return `{"step_id": "` + id + `", "action": "dispatch",
			"proposal": {"name": "` + name + `", "arguments": ` + args + `},
			"execution_context": {"provider": "openai", "api_family": "responses", "response_id": "resp-` + id + `",
				"call_id": "` + call + `", "operation_id": "op-` + call + `", "idempotency_key": ` + k + `,
				"adapter_revision": "openai-responses-v1"},
			"approval": "` + approval + `", "now": 1000, "failure": "none", "status_ref_from": null,
			"expected": ` + want + `}`
	}
	const (
		ok7   = `{"code": "OK", "delivery": "fresh", "data": {"order_ref": "ORDER-7", "status": "paid"}, "side_effect_count": 0}`
		nf0   = `{"code": "NOT_FOUND", "delivery": "fresh", "data": null, "side_effect_count": 0}`
		nf1   = `{"code": "NOT_FOUND", "delivery": "fresh", "data": null, "side_effect_count": 1}`
		write = `create_refund_draft`
	)
	draft := func(order string) string {
		return `{"code": "OK", "delivery": "fresh", "data": {"draft_id": "DRAFT-1", "order_ref": "` + order +
			`", "reason": "duplicate"}, "side_effect_count": 1}`
	}
	refund := func(order string) string { return `{"order_ref": "` + order + `", "reason": "duplicate"}` }
	principal := func(tenant, subject string) string {
		return `{"tenant_id": "` + tenant + `", "subject_id": "` + subject + `", "roles": []}`
	}
	runs := []struct {
		id, principal string
		steps         []string
	}{
		{"user-1-first", principal("tenant-a", "user-1"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-7"}`, "call-read", "", "none", ok7),
			step("write", write, refund("ORDER-7"), "call-write", "key-shared", "valid", draft("ORDER-7")),
		}},
		// Same tenant, another subject: the same call ids and key are new.
		// Replaying user-1's stored results here would leak them.
		{"user-2-same-ids", principal("tenant-a", "user-2"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-7"}`, "call-read", "", "none", nf0),
			step("write-own", write, refund("ORDER-8"), "call-write", "key-shared", "valid", draft("ORDER-8")),
			step("write-users-1-order", write, refund("ORDER-7"), "call-other", "key-other", "valid", nf1),
		}},
		// Another tenant, the same subject id: nothing is shared either.
		{"tenant-b-same-ids", principal("tenant-b", "user-1"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-7"}`, "call-read", "", "none", nf0),
			step("write", write, refund("ORDER-9"), "call-write", "key-shared", "valid", draft("ORDER-9")),
		}},
		// Ids with separators must not make two scopes meet.
		{"separator-1", principal("t", "u:x"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-1"}`, "c", "", "none", nf0),
		}},
		{"separator-2", principal("t:u", "x"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-2"}`, "c", "", "none", nf0),
		}},
		// And user-1's own results are still there, unchanged.
		{"user-1-again", principal("tenant-a", "user-1"), []string{
			step("read", "get_order", `{"order_ref": "ORDER-7"}`, "call-read", "", "none",
				`{"code": "OK", "delivery": "local_replay", "data": {"order_ref": "ORDER-7", "status": "paid"}}`),
			step("write", write, refund("ORDER-7"), "call-write-2", "key-shared", "none",
				`{"code": "OK", "delivery": "local_replay", "data": {"draft_id": "DRAFT-1", "order_ref": "ORDER-7", "reason": "duplicate"}, "side_effect_count": 0}`),
		}},
	}
	for _, r := range runs {
		doc := `{"schema_version": "tool-cases-v2", "contract": {"model_result": "tool-model-result-v2", "protected_audit": "tool-audit-v2"},
			"cases": [{"id": "` + r.id + `", "principal": ` + r.principal + `, "steps": [` + strings.Join(r.steps, ",") + `]}]}`
		f, err := cases.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
		rep := cases.Run(context.Background(), &f.Cases[0], w)
		if rep.Err != nil {
			t.Errorf("%s: %v", r.id, rep.Err)
		}
		for _, s := range rep.Steps {
			for _, m := range s.Mismatch {
				// The runner counts a tenant's audit records from the start
				// of its own run; on a store shared with an earlier run of
				// the same tenant it sees that run's records too.
				if strings.HasPrefix(m, "audit_records ") {
					continue
				}
				t.Errorf("%s step %s: %s\n  model result: %s", r.id, s.StepID, m, s.Result)
			}
		}
	}
}
