package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/pgtest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSeedSuitePasses(t *testing.T) {
	code, out, errOut := runCmd(t, "../../testdata/tool-cases-v2.json")
	if code != 0 || !strings.HasSuffix(out, "18 passed, 0 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "PASS "); n != 18 {
		t.Fatalf("%d PASS lines, want 18", n)
	}
}

func TestSeveralFiles(t *testing.T) {
	code, out, _ := runCmd(t, "../../testdata/tool-cases-v2.json", "../../testdata/cases-extra.json")
	if code != 0 || !strings.HasSuffix(out, "90 passed, 0 failed\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// The cases section 1 of the contract allows (an empty tool name, empty and
// null ids) are accepted and pass; the command once refused the whole file.
func TestSection8File(t *testing.T) {
	code, out, errOut := runCmd(t, "../../testdata/cases-section8.json")
	if code != 0 || !strings.Contains(out, "PASS section8-empty-tool-name-is-unknown-tool\n") ||
		!strings.HasSuffix(out, "8 passed, 0 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// A case whose expectation is wrong fails with the step and field named,
// and the command exits 1.
func TestFailingCase(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/tool-cases-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	c := f["cases"].([]any)[0].(map[string]any)
	f["cases"] = []any{c}
	step := c["steps"].([]any)[0].(map[string]any)
	step["expected"].(map[string]any)["code"] = "NOT_FOUND"
	path := filepath.Join(t.TempDir(), "wrong.json")
	b, _ := json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd(t, path)
	want := `FAIL read-own-order read: code want "NOT_FOUND" got "OK"`
	if code != 1 || !strings.Contains(out, want) || !strings.HasSuffix(out, "0 passed, 1 failed\n") {
		t.Fatalf("exit %d, want 1 and %q:\n%s", code, want, out)
	}
}

func TestMalformedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.json")
	bad := `{"schema_version":"tool-cases-v2","cases":[{"id":"c1","principal":{"tenant_id":"t","subject_id":"s","roles":[]},
	  "steps":[{"step_id":"s1","action":"dispatch","proposal":{"name":"get_order","arguments":{}},"execution_context":{},
	  "approval":"maybe","now":1,"failure":"none","status_ref_from":null,"expected":{"code":"OK"}}]}]}`
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, path)
	if code != 2 || !strings.Contains(errOut, "case c1 step s1: field approval") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the case, step and field", code, errOut)
	}
	if code, _, _ := runCmd(t, filepath.Join(t.TempDir(), "missing.json")); code != 2 {
		t.Fatalf("missing file: exit %d, want 2", code)
	}
	if code, _, _ := runCmd(t); code != 2 {
		t.Fatalf("no arguments: exit %d, want 2", code)
	}
}

func TestJSONOutput(t *testing.T) {
	code, out, _ := runCmd(t, "-json", "../../testdata/tool-cases-v2.json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		lines++
		var step struct {
			Case   string                     `json:"case"`
			Step   string                     `json:"step"`
			Result map[string]json.RawMessage `json:"model_result"`
			Audit  []map[string]any           `json:"audit"`
		}
		if err := json.Unmarshal([]byte(line), &step); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if string(step.Result["contract"]) != `"tool-model-result-v2"` || len(step.Audit) != 1 ||
			step.Audit[0]["contract"] != "tool-audit-v2" || step.Audit[0]["hash"] == "" {
			t.Fatalf("step line %s", line)
		}
	}
	if lines != 23 {
		t.Fatalf("%d step lines, want the seed's 23 steps", lines)
	}
}

func TestRealRedis(t *testing.T) {
	for _, env := range []string{"TOOLGUARD_REDIS_URL", "TOOLGUARD_REDIS_CLUSTER"} {
		addr := os.Getenv(env)
		if addr == "" {
			t.Logf("%s not set: skipping that backend", env)
			continue
		}
		code, out, errOut := runCmd(t, "-redis", addr, "../../testdata/tool-cases-v2.json", "../../testdata/cases-extra.json")
		if code != 0 || !strings.HasSuffix(out, "90 passed, 0 failed\n") {
			t.Fatalf("%s: exit %d\n%s\n%s", env, code, out, errOut)
		}
	}
}

// The same suites through MCP: each step a tools/call from an MCP client
// to the adapters/mcp server, the model result read back from the
// CallToolResult's structuredContent.
func TestSuitesOverMCP(t *testing.T) {
	code, out, errOut := runCmd(t, "-adapter", "mcp", "../../testdata/tool-cases-v2.json")
	if code != 0 || !strings.HasSuffix(out, "18 passed, 0 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "-adapter", "mcp", "../../testdata/tool-cases-v2.json",
		"../../testdata/cases-extra.json", "../../testdata/cases-section8.json")
	if code != 0 || !strings.HasSuffix(out, "98 passed, 0 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// Every adapter runs every case file to the same verdicts, and the audit
// records name the adapter that carried the calls.
func TestEveryAdapter(t *testing.T) {
	for adapter, family := range map[string]string{"responses": "responses", "chat": "chat_completions", "anthropic": "messages"} {
		code, out, errOut := runCmd(t, "-adapter", adapter, "-json", "../../testdata/tool-cases-v2.json",
			"../../testdata/cases-extra.json", "../../testdata/cases-section8.json")
		if code != 0 || !strings.HasSuffix(out, "98 passed, 0 failed\n") {
			t.Fatalf("%s: exit %d, stdout:\n%s\nstderr:\n%s", adapter, code, out, errOut)
		}
		if !strings.Contains(out, `"api_family":"`+family+`"`) {
			t.Errorf("%s: no audit record names api_family %s", adapter, family)
		}
		for _, other := range []string{"responses", "chat_completions", "messages", "generate_content"} {
			if other != family && strings.Contains(out, `"api_family":"`+other+`"`) {
				t.Errorf("%s: an audit record names api_family %s", adapter, other)
			}
		}
	}
	// Gemini's wire holds arguments as an object: the three cases whose
	// arguments are not one (or repeat a member) cannot reach it, and are
	// counted apart, never as passed.
	code, out, errOut := runCmd(t, "-adapter", "gemini", "-json", "../../testdata/tool-cases-v2.json",
		"../../testdata/cases-extra.json", "../../testdata/cases-section8.json")
	if code != 0 || !strings.HasSuffix(out, "95 passed, 0 failed, 3 not carried by gemini\n") || !strings.Contains(out, `"api_family":"generate_content"`) {
		t.Fatalf("gemini: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "-adapter", "gemini", "../../testdata/tool-cases-v2.json"); code != 0 || !strings.HasSuffix(out, "18 passed, 0 failed\n") {
		t.Errorf("gemini, the seed suite: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, "-adapter", "bedrock", "../../testdata/tool-cases-v2.json"); code != 2 || !strings.Contains(errOut, "anthropic, chat, gemini, responses") {
		t.Errorf("unknown adapter: exit %d, %s", code, errOut)
	}
}

// The seed suite on Postgres (-store postgres://…): each case in a schema
// of its own, dropped after it, or kept and named with -keep.
func TestPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	code, out, errOut := runCmd(t, "-store", db, "../../testdata/tool-cases-v2.json")
	if code != 0 || !strings.HasSuffix(out, "18 passed, 0 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	pool := pgtest.Pool(t, db, 1)
	schemas := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'tgcases_%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := schemas(); n != 0 {
		t.Fatalf("%d case schemas left after the run, want 0", n)
	}
	code, out, _ = runCmd(t, "-store", db, "-keep", "-adapter", "chat", "../../testdata/cases-section8.json")
	if code != 0 || strings.Count(out, "SCHEMA ") != 8 || !strings.HasSuffix(out, "8 passed, 0 failed\n") {
		t.Fatalf("-keep: exit %d:\n%s", code, out)
	}
	if n := schemas(); n != 8 {
		t.Fatalf("-keep left %d case schemas, want 8", n)
	}
	if code, _, errOut := runCmd(t, "-store", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "../../testdata/tool-cases-v2.json"); code != 2 || !strings.Contains(errOut, "-store") {
		t.Fatalf("an unreachable server: exit %d, %s; want 2 naming -store", code, errOut)
	}
}
