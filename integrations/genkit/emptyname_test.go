package tggenkit_test

import (
	"encoding/json"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/orders"
)

// TestEmptyToolName: a tool request with an empty name (contract section
// 1) is the guard's to answer, UNKNOWN_TOOL and audited, like any name the
// generation has no tool for; it does not fail the generation, and the
// other calls of the reply are answered as ever.
func TestEmptyToolName(t *testing.T) {
	svc := orders.NewService()
	m := &script{}
	gk := newGenkit(t.Context(), m)
	set := orders.Tools(svc)
	store := guard.NewMemStore(guard.MemStoreOptions{})
	g := guard.New(set, store, guard.Options{})
	gd, err := tggenkit.New(g, set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.push(calls(
		&ai.ToolRequest{Name: "", Ref: "nameless", Input: map[string]any{"order_ref": "ORDER-7"}},
		&ai.ToolRequest{Name: "get_order", Ref: "read", Input: map[string]any{"order_ref": "ORDER-7"}}))
	resp, err := generate(session(userA, "s1"), gk, gd, ai.WithPrompt("ORDER-7?"))
	if err != nil {
		t.Fatalf("the generation failed on a call with an empty tool name: %v", err)
	}
	if res := result(t, resp.History(), "nameless"); res.Code != guard.CodeUnknownTool {
		t.Errorf("empty name = %s, want UNKNOWN_TOOL", res)
	}
	if res := result(t, resp.History(), "read"); res.Code != guard.CodeOK {
		t.Errorf("get_order = %s, want OK", res)
	}
	if n := svc.Calls(); n != 1 {
		t.Errorf("the service ran %d times, want 1", n)
	}
	// Audited as the model made it: the tool name empty, not the name the
	// request went under inside Genkit.
	recs, _, err := store.Audit(t.Context(), userA.TenantID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, r := range recs {
		var b guard.AuditBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		if r.Code == guard.CodeUnknownTool {
			tools = append(tools, b.Tool)
		}
	}
	if len(tools) != 1 || tools[0] != "" {
		t.Errorf("UNKNOWN_TOOL records name %q, want one with the empty name", tools)
	}
}
