package toolset

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// structOf builds a struct type with n string fields f0…f(n-1), each with
// the given jsonschema tag.
func structOf(n int, schemaTag string) reflect.Type {
	fields := make([]reflect.StructField, n)
	for i := range fields {
		tag := fmt.Sprintf(`json:"f%d"`, i)
		if schemaTag != "" {
			tag += ` jsonschema:"` + schemaTag + `"`
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[string](), Tag: reflect.StructTag(tag)}
	}
	return reflect.StructOf(fields)
}

func TestSchemaPropertyLimit(t *testing.T) {
	t.Parallel()
	if _, err := schemaForType(structOf(5000, "")); err != nil {
		t.Errorf("5000 properties rejected: %v", err)
	}
	_, err := schemaForType(structOf(5001, ""))
	if err == nil || !strings.Contains(err.Error(), "5000 properties") {
		t.Errorf("5001 properties: %v", err)
	}
	// The limit is on the total over all objects, not per object.
	inner := structOf(2600, "")
	outer := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: inner, Tag: `json:"a"`},
		{Name: "B", Type: inner, Tag: `json:"b"`},
	})
	if _, err := schemaForType(outer); err == nil {
		t.Error("5202 properties in two objects accepted")
	}
}

func TestSchemaEnumLimit(t *testing.T) {
	enum := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("enum=v%d", i))
		}
		return strings.Join(parts, ",")
	}
	s, err := schemaForType(structOf(1, enum(1000)))
	if err != nil {
		t.Fatalf("1000 enum values rejected: %v", err)
	}
	var m struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(s.JSON(), &m); err != nil || len(m.Properties["f0"].Enum) != 1000 {
		t.Fatalf("enum not in schema (%v): %s", err, s.JSON()[:200])
	}
	if _, err := schemaForType(structOf(1, enum(1001))); err == nil || !strings.Contains(err.Error(), "1000 enum values") {
		t.Errorf("1001 enum values: %v", err)
	}
}

// enumTag is a jsonschema tag of n enum values, each the given width.
func enumTag(n, width int) string {
	parts := make([]string, n)
	for i := range parts {
		v := fmt.Sprintf("v%d", i)
		parts[i] = "enum=" + v + strings.Repeat("x", max(width-len(v), 0))
	}
	return strings.Join(parts, ",")
}

// TestSchemaStrictSizeLimits: the limits OpenAI's strict mode puts on a
// whole schema, each at its edge and one past it.
func TestSchemaStrictSizeLimits(t *testing.T) {
	t.Parallel()
	named := func(names ...string) reflect.Type {
		var fields []reflect.StructField
		for i, n := range names {
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[string](),
				Tag: reflect.StructTag(`json:"` + n + `"`)})
		}
		return reflect.StructOf(fields)
	}
	long := func(n, width int) []string {
		out := make([]string, n)
		for i := range out {
			p := fmt.Sprintf("p%d_", i)
			out[i] = p + strings.Repeat("n", width-len(p))
		}
		return out
	}
	for _, c := range []struct {
		name string
		typ  reflect.Type
		want string // "" when accepted
	}{
		{"250 long values", structOf(1, enumTag(250, 100)), ""},                // 25,000 characters, but only 250 values
		{"300 values of 15,000 characters", structOf(1, enumTag(300, 50)), ""}, // at the edge
		{"300 values of 18,000 characters", structOf(1, enumTag(300, 60)), "more than 250 values may hold at most 15000"},
		{"600 + 400 values over two enums", structOf(2, enumTag(500, 3)), ""},
		{"600 + 600 values over two enums", structOf(2, enumTag(600, 3)), "more than 1000 enum values in the schema"},
		{"120,000 characters of names", named(long(1000, 120)...), ""},
		{"120,001 characters of names", named(append(long(1000, 120), "x")...), "120000 characters"},
	} {
		_, err := schemaForType(c.typ)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
