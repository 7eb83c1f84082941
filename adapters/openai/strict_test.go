package tgopenai

import (
	"encoding/json"
	"testing"

	"github.com/toolguard/toolguard/internal/toolstest"
	"github.com/toolguard/toolguard/toolset"
)

// A strict schema is declared strict; one written elsewhere is declared as
// is, strict false.
func TestToolStrictOnlyForStrictSchemas(t *testing.T) {
	strict := toolstest.Search()
	for _, tc := range []struct {
		tool   toolset.Declared
		strict bool
		params string
	}{
		{strict, true, string(strict.Schema().JSON())},
		{toolstest.LooseSearch(), false, toolstest.LooseSchema},
	} {
		b, err := json.Marshal(toolParam(tc.tool))
		if err != nil {
			t.Fatal(err)
		}
		var def struct {
			Name       string          `json:"name"`
			Strict     *bool           `json:"strict"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(b, &def); err != nil {
			t.Fatal(err)
		}
		if def.Name != "search" || def.Strict == nil || *def.Strict != tc.strict || !sameJSON(def.Parameters, tc.params) {
			t.Errorf("definition %s, want strict %t and parameters %s", b, tc.strict, tc.params)
		}
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a []byte, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
