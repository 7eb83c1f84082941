package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

type note struct {
	Text string `json:"text"`
	Tag  string `json:"tag,omitempty"`
}

type noteIn struct {
	OrderRef string  `json:"order_ref"`
	Reason   *string `json:"reason"`
	Note     *note   `json:"note,omitempty"`
	Notes    []note  `json:"notes,omitempty"`
}

var noteTool = toolset.Write("add_note", "Add a note.", func(context.Context, *guard.Invocation, noteIn) (string, error) { return "ok", nil }, nil)

// An absent nullable member reads as null, at the top level, in a nested
// object and in array items; what does not allow null stays absent, and
// arguments that are not a valid object are left for the guard to refuse.
func ExampleFillNulls() {
	schema := noteTool.Schema().Map()
	for _, args := range []string{
		`{"order_ref":"ORDER-7"}`,
		`{"order_ref":"ORDER-7","note":{"text":"hi"},"notes":[{"text":"a"}]}`,
		`{"reason":"late"}`,
		`{"order_ref":`,
		`"ORDER-7"`,
	} {
		fmt.Println(string(provider.FillNulls(schema, []byte(args))))
	}
	// Output:
	// {"note":null,"notes":null,"order_ref":"ORDER-7","reason":null}
	// {"note":{"tag":null,"text":"hi"},"notes":[{"tag":null,"text":"a"}],"order_ref":"ORDER-7","reason":null}
	// {"note":null,"notes":null,"reason":"late"}
	// {"order_ref":
	// "ORDER-7"
}

// The filled arguments pass the very schema the guard validates against;
// without the filling they do not.
func TestFilledArgumentsValidate(t *testing.T) {
	set := toolset.MustNew(noteTool)
	tool := set.Lookup("add_note")
	for _, args := range []string{`{"order_ref":"ORDER-7"}`, `{"order_ref":"ORDER-7","note":{"text":"hi"}}`} {
		if _, err := decode(tool, []byte(args)); err == nil {
			t.Errorf("%s passes without filling; the test no longer tests anything", args)
		}
		filled := provider.FillNulls(noteTool.Schema().Map(), []byte(args))
		if _, err := decode(tool, filled); err != nil {
			t.Errorf("%s filled as %s: %v", args, filled, err)
		}
	}
}

func decode(tool guard.Tool, args []byte) (any, error) {
	var v any
	if err := jsonUnmarshal(args, &v); err != nil {
		return nil, err
	}
	return tool.Decode(args, v)
}

// jsonUnmarshal decodes as the guard's parser does: numbers as json.Number.
func jsonUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
