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
