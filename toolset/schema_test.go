package toolset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

type mapIn struct {
	M map[string]string `json:"m"`
}

type nestedMapIn struct {
	Items []struct {
		Attrs map[string]int `json:"attrs"`
	} `json:"items"`
}

type anyIn struct {
	X any `json:"x"`
}

type stringerIn struct {
	S fmt.Stringer `json:"s"`
}

type sliceOfAnyIn struct {
	L []any `json:"l"`
}

type funcIn struct {
	F func() `json:"f"`
}

type chanIn struct {
	C chan int `json:"c"`
}

type complexIn struct {
	C complex128 `json:"c"`
}

type node struct {
	Value string `json:"value"`
	Next  *node  `json:"next,omitempty"`
}

type tree struct {
	Kids []tree `json:"kids"`
}

type mutualA struct {
	B *mutualB `json:"b"`
}

type mutualB struct {
	A []mutualA `json:"a"`
}

type wrapsRecursive struct {
	Head node `json:"head"`
}

// Fields hidden from JSON do not count.
type hiddenBadFieldsIn struct {
	Name    string            `json:"name"`
	Skipped map[string]string `json:"-"`
	private any
}

type deep11 struct {
	N deep10 `json:"n"`
}

// Arrays add a nesting level per dimension: 1 (property) + 10 (items).
type deepArrays struct {
	A [][][][][][][][][][]int `json:"a"`
}

func TestSchemaForRejects(t *testing.T) {
	tests := []struct {
		name   string
		schema func() (*toolset.Schema, error)
		read   func()
		want   string
	}{
		{"map field", toolset.SchemaFor[mapIn], func() { readTool[mapIn]() }, "map"},
		{"map in slice of structs", toolset.SchemaFor[nestedMapIn], func() { readTool[nestedMapIn]() }, "map"},
		{"interface field", toolset.SchemaFor[anyIn], func() { readTool[anyIn]() }, "interface"},
		{"named interface field", toolset.SchemaFor[stringerIn], func() { readTool[stringerIn]() }, "interface"},
		{"slice of interfaces", toolset.SchemaFor[sliceOfAnyIn], func() { readTool[sliceOfAnyIn]() }, "interface"},
		{"func field", toolset.SchemaFor[funcIn], func() { readTool[funcIn]() }, "no JSON form"},
		{"chan field", toolset.SchemaFor[chanIn], func() { readTool[chanIn]() }, "no JSON form"},
		{"complex field", toolset.SchemaFor[complexIn], func() { readTool[complexIn]() }, "no JSON form"},
		{"int", toolset.SchemaFor[int], func() { readTool[int]() }, "not a struct"},
		{"string", toolset.SchemaFor[string], func() { readTool[string]() }, "not a struct"},
		{"slice of structs", toolset.SchemaFor[[]flatIn], func() { readTool[[]flatIn]() }, "not a struct"},
		{"map", toolset.SchemaFor[map[string]any], func() { readTool[map[string]any]() }, "not a struct"},
		{"any", toolset.SchemaFor[any], func() { readTool[any]() }, "not a struct"},
		{"pointer to int", toolset.SchemaFor[*int], func() { readTool[*int]() }, "not a struct"},
		{"nesting 11", toolset.SchemaFor[deep11], func() { readTool[deep11]() }, "deeper than 10"},
		{"nested arrays 11", toolset.SchemaFor[deepArrays], func() { readTool[deepArrays]() }, "deeper than 10"},
		{"format uri tag", toolset.SchemaFor[uriTagRefused], func() { readTool[uriTagRefused]() }, `field uriTagRefused.URL: format "uri" is not supported by OpenAI strict mode; use a string with a pattern`},
		{"url.URL", toolset.SchemaFor[urlRefused], func() { readTool[urlRefused]() }, `field urlRefused.URL: url.URL is not a JSON string`},
		{"other format", toolset.SchemaFor[otherFormatRefused], func() { readTool[otherFormatRefused]() }, `field otherFormatRefused.Items[].Ref: format "uri-reference" is not supported`},
		{"minLength", toolset.SchemaFor[minLengthRefused], func() { readTool[minLengthRefused]() }, "field minLengthRefused.Name: minLength is not supported by OpenAI strict mode; use a pattern"},
		{"maxLength", toolset.SchemaFor[maxLengthRefused], func() { readTool[maxLengthRefused]() }, "field maxLengthRefused.Name: maxLength is not supported"},
		{"default", toolset.SchemaFor[defaultRefused], func() { readTool[defaultRefused]() }, "field defaultRefused.Mode: default is not supported"},
		{"example", toolset.SchemaFor[exampleRefused], func() { readTool[exampleRefused]() }, "field exampleRefused.Mode: examples is not supported"},
		{"uniqueItems", toolset.SchemaFor[uniqueItemsRefused], func() { readTool[uniqueItemsRefused]() }, "field uniqueItemsRefused.Tags: uniqueItems is not supported"},
		{"readOnly", toolset.SchemaFor[readOnlyRefused], func() { readTool[readOnlyRefused]() }, "field readOnlyRefused.ID: readOnly is not supported"},
		{"jsonschema_extras", toolset.SchemaFor[extrasRefused], func() { readTool[extrasRefused]() }, "field extrasRefused.Name: minLength is not supported"},
		{"time.Duration", toolset.SchemaFor[durationRefused], func() { readTool[durationRefused]() }, "field durationRefused.Timeout: time.Duration is a JSON integer of nanoseconds"},
		{"nullable tag", toolset.SchemaFor[nullableTagRefused], func() { readTool[nullableTagRefused]() }, `field nullableTagRefused.Note: jsonschema tag "nullable" is not supported: make the field a pointer`},
		{"oneof_type tag", toolset.SchemaFor[oneofTypeRefused], func() { readTool[oneofTypeRefused]() }, `field oneofTypeRefused.V: jsonschema tag "oneof_type" is not supported`},
		{"anyof_type tag", toolset.SchemaFor[anyofTypeRefused], func() { readTool[anyofTypeRefused]() }, `field anyofTypeRefused.V: jsonschema tag "anyof_type" is not supported`},
		{"type tag", toolset.SchemaFor[typeTagRefused], func() { readTool[typeTagRefused]() }, `field typeTagRefused.N: jsonschema tag "type" is not supported`},
		{"unknown tag key", toolset.SchemaFor[unknownTagRefused], func() { readTool[unknownTagRefused]() }, `field unknownTagRefused.N: jsonschema tag key "descripton" is unknown`},
		{"description cut by a comma", toolset.SchemaFor[commaCutRefused], func() { readTool[commaCutRefused]() }, `field commaCutRefused.Ref: jsonschema tag entry " e.g. ORDER-7." is not a keyword`},
		{"uintptr", toolset.SchemaFor[uintptrRefused], func() { readTool[uintptrRefused]() }, "field uintptrRefused.P: type uintptr has no JSON form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.schema()
			if err == nil {
				t.Fatalf("SchemaFor accepted it: %s", s.JSON())
			}
			if s != nil {
				t.Error("non-nil schema with error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "toolset: ") {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			// The error is cached, not turned into success the second time.
			if _, err2 := tt.schema(); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second call: %v, first %v", err2, err)
			}
			if msg := panics(tt.read); msg == "" {
				t.Error("Read did not panic")
			} else if !strings.Contains(msg, tt.want) {
				t.Errorf("Read panic %q does not mention %q", msg, tt.want)
			}
		})
	}
	// Write panics the same way as Read.
	if panics(func() { writeTool[mapIn]() }) == "" {
		t.Error("Write with a map field did not panic")
	}
}

func TestSchemaForAcceptsHiddenBadFields(t *testing.T) {
	m := mustSchema[hiddenBadFieldsIn](t)
	if got := propNames(m); len(got) != 1 || got[0] != "name" {
		t.Errorf("properties %v, want [name]", got)
	}
}

func readTool[In any]() *toolset.Tool[In, struct{}] {
	return toolset.Read("t", "d", func(context.Context, *guard.Invocation, In) (struct{}, error) { return struct{}{}, nil }, nil)
}

func writeTool[In any]() *toolset.Tool[In, struct{}] {
	return toolset.Write("t", "d", func(context.Context, *guard.Invocation, In) (struct{}, error) { return struct{}{}, nil }, nil)
}

// panics runs fn and returns the text of its panic, or "".
func panics(fn func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "(empty panic)"
			}
		}
	}()
	fn()
	return ""
}

func TestSchemaForCaches(t *testing.T) {
	a, err := toolset.SchemaFor[flatIn]()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := toolset.SchemaFor[flatIn]()
	if a != b {
		t.Error("SchemaFor returned different pointers for the same type")
	}
	// A tool of that input shares the cached schema.
	if got := readTool[flatIn]().Schema(); got != a {
		t.Error("Tool.Schema is not the cached schema")
	}
	// Distinct types, even of identical shape, get their own entries; a
	// pointer root has its own entry with the same JSON.
	type sameShape flatIn
	c, _ := toolset.SchemaFor[sameShape]()
	if c == a {
		t.Error("distinct types share a schema pointer")
	}
	if string(c.JSON()) != string(a.JSON()) {
		t.Errorf("identical shapes, different schemas:\n%s\n%s", c.JSON(), a.JSON())
	}
	p, _ := toolset.SchemaFor[*flatIn]()
	if string(p.JSON()) != string(a.JSON()) {
		t.Errorf("pointer root schema differs:\n%s\n%s", p.JSON(), a.JSON())
	}
}

// Concurrent first use of a type must be race-free and agree on one schema.
func TestSchemaForConcurrent(t *testing.T) {
	type fresh struct {
		A string `json:"a"`
	}
	const n = 8
	got := make(chan *toolset.Schema, n)
	for range n {
		go func() {
			s, err := toolset.SchemaFor[fresh]()
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
	}
	first := <-got
	for range n - 1 {
		if s := <-got; s != first {
			t.Error("concurrent SchemaFor returned different pointers")
		}
	}
}

func TestSchemaMapIsFresh(t *testing.T) {
	s, err := toolset.SchemaFor[flatIn]()
	if err != nil {
		t.Fatal(err)
	}
	before := string(s.JSON())
	m := s.Map()
	m["type"] = "array"
	delete(m, "properties")
	if s.Map()["type"] != "object" || string(s.JSON()) != before {
		t.Error("mutating Map() changed the schema")
	}
}

func TestNames(t *testing.T) {
	fn := func(context.Context, *guard.Invocation, flatIn) (int, error) { return 0, nil }
	for _, name := range []string{"a", "get_order", "Get-Order-2", strings.Repeat("x", 64)} {
		if msg := panics(func() { toolset.Read(name, "d", fn, nil) }); msg != "" {
			t.Errorf("valid name %q panicked: %s", name, msg)
		}
	}
	for _, name := range []string{"", "has space", "dot.name", "slash/name", "ünï", strings.Repeat("x", 65), "tab\t", "new\nline"} {
		if msg := panics(func() { toolset.Read(name, "d", fn, nil) }); msg == "" {
			t.Errorf("invalid name %q accepted by Read", name)
		}
		if msg := panics(func() { toolset.Write(name, "d", fn, nil) }); msg == "" {
			t.Errorf("invalid name %q accepted by Write", name)
		}
		// New checks names of tools that did not come from Read/Write.
		if _, err := toolset.New(renamed{readTool[flatIn](), name}); err == nil {
			t.Errorf("invalid name %q accepted by New", name)
		}
	}
	if msg := panics(func() { toolset.Read[flatIn, int]("ok", "d", nil, nil) }); !strings.Contains(msg, "nil function") {
		t.Errorf("nil function: panic %q", msg)
	}
}

// renamed is a Declared whose name did not pass through Read or Write.
type renamed struct {
	*toolset.Tool[flatIn, struct{}]
	name string
}

func (r renamed) Name() string { return r.name }

func TestSetNew(t *testing.T) {
	a := readTool[flatIn]()
	fn := func(context.Context, *guard.Invocation, flatIn) (int, error) { return 0, nil }
	b := toolset.Write("b", "", fn, nil)
	c := toolset.Read("C", "", fn, nil)

	if _, err := toolset.New(a, b, toolset.Read("t", "other", fn, nil)); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate name: %v", err)
	}
	if msg := panics(func() { toolset.MustNew(a, a) }); msg == "" {
		t.Error("MustNew with a duplicate did not panic")
	}

	s, err := toolset.New(c, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var _ guard.Tools = s
	if got := s.Lookup("t"); got != guard.Tool(a) {
		t.Errorf("Lookup(t) = %v", got)
	}
	if s.Lookup("c") != nil || s.Lookup("T") != nil || s.Lookup("") != nil || s.Lookup("b ") != nil {
		t.Error("Lookup is not exact and case-sensitive")
	}
	tools := s.Tools()
	if len(tools) != 3 || tools[0].Name() != "C" || tools[1].Name() != "t" || tools[2].Name() != "b" {
		t.Errorf("Tools() order %v", names(tools))
	}
	tools[0] = nil // the returned slice is a copy
	if s.Tools()[0] == nil {
		t.Error("Tools() exposes the set's slice")
	}

	d := toolset.Read("d", "", fn, nil)
	s2, err := s.With(d)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Lookup("d") == nil || s.Lookup("d") != nil {
		t.Error("With changed the original set or did not add")
	}
	if _, err := s.With(toolset.Read("b", "", fn, nil)); err == nil {
		t.Error("With accepted a duplicate name")
	}
	empty, err := toolset.New()
	if err != nil || len(empty.Tools()) != 0 || empty.Lookup("t") != nil {
		t.Errorf("empty set: %v", err)
	}
}

func names(ts []toolset.Declared) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}
