package tggemini_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/toolstest"
	"github.com/toolguard/toolguard/toolset"
)

// Absent nullable members are filled with null for a strict schema only:
// to a schema written elsewhere absent is not null.
func TestFillOnlyStrictSchemas(t *testing.T) {
	resp := &genai.GenerateContentResponse{ResponseID: "r1", Candidates: []*genai.Candidate{{Content: &genai.Content{Role: "model",
		Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: "search", Args: map[string]any{"q": "x"}}}}}}}}
	for _, tc := range []struct {
		tool toolset.Declared
		args string
	}{
		{toolstest.Search(), `{"limit":null,"q":"x"}`},
		{toolstest.LooseSearch(), `{"q":"x"}`},
	} {
		calls := tggemini.Calls(resp, []toolset.Declared{tc.tool})
		if len(calls) != 1 || calls[0].Arguments != tc.args {
			t.Errorf("strict %t: calls %+v, want arguments %s", tc.tool.Schema().Strict(), calls, tc.args)
		}
	}
}

// A declaration's parametersJsonSchema is the very schema the guard
// validates against, byte for byte once encoded.
func TestDeclarationsCarryTheGuardSchema(t *testing.T) {
	set := orders.Tools(orders.NewService())
	decls := tggemini.Tools(set)
	if len(decls) != 1 || len(decls[0].FunctionDeclarations) != len(set.Tools()) {
		t.Fatalf("declarations %+v", decls)
	}
	for i, tool := range set.Tools() {
		d := decls[0].FunctionDeclarations[i]
		got, _ := json.Marshal(d.ParametersJsonSchema)
		want, _ := json.Marshal(tool.Schema().Map())
		if d.Name != tool.Name() || d.Description != tool.Description() || string(got) != string(want) || d.Parameters != nil {
			t.Errorf("%s: declared %s %q %s, want %s", tool.Name(), d.Name, d.Description, got, want)
		}
	}
}
