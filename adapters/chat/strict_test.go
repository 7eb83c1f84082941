package tgchat

import (
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolguard/toolguard/internal/toolstest"
	"github.com/toolguard/toolguard/toolset"
)

// A strict tool is declared strict and its absent nullable members arrive
// as null; a loose one is declared as is, strict false, and its arguments
// are left alone (absent is not null to a schema written elsewhere).
func TestStrictOnlyForStrictSchemas(t *testing.T) {
	var msg oai.ChatCompletionMessage
	if err := json.Unmarshal([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]}`), &msg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool   toolset.Declared
		strict bool
		args   string
	}{
		{toolstest.Search(), true, `{"limit":null,"q":"x"}`},
		{toolstest.LooseSearch(), false, `{"q":"x"}`},
	} {
		b, err := json.Marshal(toolParam(tc.tool))
		if err != nil {
			t.Fatal(err)
		}
		var def struct {
			Function struct {
				Strict *bool `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(b, &def); err != nil {
			t.Fatal(err)
		}
		if def.Function.Strict == nil || *def.Function.Strict != tc.strict {
			t.Errorf("definition %s, want strict %t", b, tc.strict)
		}
		calls := Calls(msg, []toolset.Declared{tc.tool})
		if len(calls) != 1 || calls[0].Arguments != tc.args {
			t.Errorf("strict %t: calls %+v, want arguments %s", tc.strict, calls, tc.args)
		}
	}
}
