package toolset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/toolset"
)

// richIn is a moderately rich tool input: every scalar kind, sized
// integers, enums, optional fields of each shape, nested and repeated
// objects, a fixed-size array and times.
type richIn struct {
	ID     string     `json:"id" jsonschema:"description=Identifier"`
	Count  int8       `json:"count"`
	Big    int64      `json:"big,omitempty"`
	Small  uint16     `json:"small,omitempty"`
	Ratio  float64    `json:"ratio"`
	Flag   bool       `json:"flag,omitempty"`
	Kind   string     `json:"kind" jsonschema:"enum=refund,enum=credit"`
	Level  int        `json:"level,omitempty" jsonschema:"enum=1,enum=2"`
	Tags   []string   `json:"tags"`
	Items  []richItem `json:"items,omitempty"`
	Addr   *address   `json:"addr,omitempty"`
	When   *time.Time `json:"when,omitempty"`
	Pair   [2]int     `json:"pair"`
	Note   *string    `json:"note,omitempty"`
	Nested struct {
		On    bool     `json:"on"`
		Score *float32 `json:"score,omitempty"`
	} `json:"nested"`
}

type richItem struct {
	SKU string `json:"sku"`
	Qty uint8  `json:"qty"`
}

func richTool() *toolset.Tool[richIn, richIn] {
	return toolset.Read("rich", "Echoes its input.", func(_ context.Context, _ *guard.Invocation, in richIn) (richIn, error) { return in, nil }, nil)

}

// fillNulls adds null for every property the schema lists that v lacks:
// strict mode spells an absent optional member as null, while Go's
// omitempty omits it.
func fillNulls(schema map[string]any, v any) {
	if branches, ok := schema["anyOf"].([]any); ok {
		for _, b := range branches {
			if bm, ok := b.(map[string]any); ok && bm["type"] != "null" {
				fillNulls(bm, v)
			}
		}
		return
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for name, ps := range props {
			if _, ok := v[name]; !ok {
				v[name] = nil
				continue
			}
			fillNulls(ps.(map[string]any), v[name])
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for _, e := range v {
			fillNulls(items, e)
		}
	}
}

// FuzzDecode feeds arbitrary bytes through canon.Parse and Tool.Decode: no
// panics; rejections are INVALID_ARGUMENTS with a model-safe message;
// accepted arguments decode to a value that re-marshals to arguments the
// schema accepts again and that decode to the same value.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"id":"x","count":1,"big":null,"small":null,"ratio":0.5,"flag":null,"kind":"refund","level":null,"tags":[],"items":null,"addr":null,"when":null,"pair":[1,2],"note":null,"nested":{"on":true,"score":null}}`))
	tool := richTool()
	var gt guard.Tool = tool
	schema := tool.Schema().Map()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, parsed, err := canon.Parse(data, canon.Limits{MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		v, err := gt.Decode(c, parsed)
		if err != nil {
			if code, ok := guard.CodeOf(err); !ok || code != guard.CodeInvalidArguments {
				t.Fatalf("Decode(%s): error %v, want INVALID_ARGUMENTS", c, err)
			}
			var ge *guard.Error
			if !errors.As(err, &ge) || strings.Contains(ge.Message(), "toolguard:///") || ge.Message() == "" {
				t.Fatalf("Decode(%s): message %q is not model-safe", c, err)
			}
			return
		}
		in, ok := v.(richIn)
		if !ok {
			t.Fatalf("Decode returned %T", v)
		}
		out, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("decoded %+v does not marshal: %v", in, err)
		}
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber() // keep int64 exact
		var tree any
		if err := d.Decode(&tree); err != nil {
			t.Fatal(err)
		}
		fillNulls(schema, tree)
		again, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		c2, parsed2, err := canon.Parse(again, canon.Limits{})
		if err != nil {
			t.Fatalf("re-marshalled %s does not parse: %v", again, err)
		}
		if err := tool.Schema().Validate(parsed2); err != nil {
			t.Fatalf("input %s decoded to %+v, which re-marshals to %s, rejected by the schema: %v", c, in, c2, err)
		}
		v2, err := gt.Decode(c2, parsed2)
		if err != nil {
			t.Fatalf("re-marshalled %s does not decode: %v", c2, err)
		}
		if !reflect.DeepEqual(normTimes(v2.(richIn)), normTimes(in)) {
			t.Fatalf("round trip changed the value:\n%+v\n%+v", in, v2)
		}
	})
}

// normTimes drops the monotonic/location representation details that
// DeepEqual would see but JSON does not carry.
func normTimes(in richIn) richIn {
	if in.When != nil {
		w := in.When.UTC()
		in.When = &w
	}
	return in
}
