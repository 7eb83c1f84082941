package tgmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// nested is an input with optional members at every level the fill
// reaches: the top, a nested object, array items, an optional object.
type nested struct {
	Name  string  `json:"name"`
	Note  *string `json:"note"`
	Inner struct {
		A int  `json:"a"`
		B *int `json:"b"`
	} `json:"inner"`
	Items []struct {
		X string  `json:"x"`
		Y *string `json:"y"`
	} `json:"items"`
	Maybe *struct {
		Z  string  `json:"z"`
		ZZ *string `json:"zz"`
	} `json:"maybe"`
}

// The listed inputSchema accepts exactly the arguments that, with absent
// nullable members filled with null (provider.FillNulls), the strict
// schema the guard validates with accepts: a client that validates
// against what it was given and the server agree.
func TestInputSchemaAcceptsWhatTheGuardAccepts(t *testing.T) {
	tool := toolset.Read("nested", "nested", func(context.Context, *guard.Invocation, nested) (struct{}, error) {
		return struct{}{}, nil
	}, nil)
	for _, tc := range []struct {
		tool toolset.Declared
		args []string
	}{
		{toolset.StatusTool(""), []string{
			`{}`, `{"operation_id":"op"}`, `{"operation_id":"op","tool":null}`, `{"operation_id":"op","tool":"t"}`,
			`{"tool":null}`, `{"operation_id":7}`, `{"operation_id":"op","tool":3}`, `{"operation_id":"op","x":1}`,
			`{"operation_id":null}`, `[]`, `"op"`,
		}},
		{tool, []string{
			`{"name":"n","inner":{"a":1},"items":[]}`,
			`{"name":"n","note":null,"inner":{"a":1,"b":null},"items":[{"x":"x"}],"maybe":null}`,
			`{"name":"n","inner":{"a":1},"items":[{"x":"x","y":"y"},{"x":"x2"}],"maybe":{"z":"z"}}`,
			`{"name":"n","inner":{"a":1},"items":[{"y":"y"}]}`,
			`{"name":"n","inner":{},"items":[]}`,
			`{"name":"n","items":[]}`,
			`{"name":"n","inner":{"a":1}}`,
			`{"name":"n","inner":{"a":1},"items":[],"maybe":{}}`,
			`{"name":"n","inner":{"a":1},"items":[],"maybe":{"zz":"q"}}`,
			`{"name":"n","inner":{"a":1,"b":"x"},"items":[]}`,
			`{"name":"n","inner":{"a":1,"c":1},"items":[]}`,
			`{"inner":{"a":1},"items":[]}`,
		}},
	} {
		listed, err := toolset.CompileSchema(tgmcp.InputSchema(tc.tool))
		if err != nil {
			t.Fatal(err)
		}
		strict := tc.tool.Schema()
		if !strict.Strict() {
			t.Fatalf("%s: not strict", tc.tool.Name())
		}
		accepted := 0
		for _, a := range tc.args {
			okListed := listed.Validate(parse(t, a)) == nil
			filled := provider.FillNulls(strict.Map(), []byte(a))
			okGuard := strict.Validate(parse(t, string(filled))) == nil
			if okListed != okGuard {
				t.Errorf("%s %s: listed schema accepts %t, the guard (filled %s) %t", tc.tool.Name(), a, okListed, filled, okGuard)
			}
			if okListed {
				accepted++
			}
		}
		if accepted == 0 || accepted == len(tc.args) {
			t.Errorf("%s: %d of %d accepted: the samples do not tell", tc.tool.Name(), accepted, len(tc.args))
		}
	}
}

func parse(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
