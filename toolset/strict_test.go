package toolset_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/toolset"
)

// strictViolations is a Go port of ../shared/tools/strictcheck.py: OpenAI's
// strict-mode subset as the Structured Outputs guide states it. It returns
// one message per violation; none means the schema is acceptable.
func strictViolations(schema map[string]any) []string {
	var errs []string
	props := 0
	if schema["type"] != "object" {
		errs = append(errs, "root must be type object and not anyOf")
	} else if _, ok := schema["anyOf"]; ok {
		errs = append(errs, "root must be type object and not anyOf")
	}
	banned := []string{"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "$schema", "$id"}
	var walk func(v any, path string, depth int)
	walk = func(v any, path string, depth int) {
		s, ok := v.(map[string]any)
		if !ok {
			return
		}
		if depth > 10 {
			errs = append(errs, fmt.Sprintf("%s: nesting deeper than 10", path))
		}
		for _, k := range banned {
			if _, ok := s[k]; ok {
				errs = append(errs, fmt.Sprintf("%s: keyword %s not allowed in strict mode", path, k))
			}
		}
		if ref, ok := s["$ref"]; ok {
			r, _ := ref.(string)
			if r != "#" && !strings.HasPrefix(r, "#/$defs/") {
				errs = append(errs, fmt.Sprintf("%s: $ref %v not to #/$defs", path, ref))
			}
		}
		var types []any
		switch t := s["type"].(type) {
		case []any:
			types = t
		default:
			types = []any{t}
		}
		_, hasProps := s["properties"]
		if slices.Contains(types, any("object")) || hasProps {
			p, _ := s["properties"].(map[string]any)
			props += len(p)
			if ap, ok := s["additionalProperties"].(bool); !ok || ap {
				errs = append(errs, fmt.Sprintf("%s: additionalProperties must be false", path))
			}
			required := map[string]bool{}
			if req, ok := s["required"].([]any); ok {
				for _, r := range req {
					if name, ok := r.(string); ok {
						required[name] = true
					}
				}
			}
			var missing []string
			for k := range p {
				if !required[k] {
					missing = append(missing, k)
				}
			}
			if len(missing) > 0 {
				sort.Strings(missing)
				errs = append(errs, fmt.Sprintf("%s: not required: %v", path, missing))
			}
			keys := make([]string, 0, len(p))
			for k := range p {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(p[k], path+"."+k, depth+1)
			}
		}
		if e, ok := s["enum"].([]any); ok && len(e) > 1000 {
			errs = append(errs, fmt.Sprintf("%s: more than 1000 enum values", path))
		}
		if items, ok := s["items"]; ok {
			walk(items, path+"[]", depth+1)
		}
		if _, ok := s["oneOf"]; ok {
			errs = append(errs, fmt.Sprintf("%s: oneOf is not in the strict subset (use anyOf)", path))
		}
		for _, key := range []string{"anyOf", "oneOf"} {
			subs, _ := s[key].([]any)
			for i, sub := range subs {
				walk(sub, fmt.Sprintf("%s.%s[%d]", path, key, i), depth)
			}
		}
		if defs, ok := s["$defs"].(map[string]any); ok {
			for k, d := range defs {
				walk(d, "$defs."+k, depth)
			}
		}
	}
	walk(schema, "$", 0)
	if props > 5000 {
		errs = append(errs, "more than 5000 properties")
	}
	return errs
}

// strictKeywords are the keywords OpenAI's strict mode accepts, as its
// Structured Outputs guide lists them ("Supported properties"): structure,
// annotations, and per type: pattern and format for strings; multipleOf,
// minimum, maximum and their exclusive forms for numbers; minItems and
// maxItems for arrays. strictcheck.py does not check keywords; this does.
var strictKeywords = map[string]bool{
	"type": true, "description": true, "title": true, "enum": true, "const": true,
	"properties": true, "required": true, "additionalProperties": true, "items": true,
	"anyOf": true, "$ref": true, "$defs": true,
	"pattern": true, "format": true,
	"multipleOf": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minItems": true, "maxItems": true,
}

// strictFormats are the string formats strict mode accepts.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// guideViolations returns one message per keyword or format outside
// strict mode's supported list, or object without "required" (even
// empty), anywhere in the schema.
func guideViolations(schema map[string]any) []string {
	var errs []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		s, ok := v.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !strictKeywords[k] {
				errs = append(errs, fmt.Sprintf("%s: keyword %s is not supported in strict mode", path, k))
			}
		}
		if _, isList := s["required"].([]any); s["type"] == "object" && !isList {
			errs = append(errs, fmt.Sprintf("%s: object without a required list", path))
		}
		if f, ok := s["format"]; ok && !strictFormats[fmt.Sprint(f)] {
			errs = append(errs, fmt.Sprintf("%s: format %v is not supported in strict mode", path, f))
		}
		for _, k := range []string{"properties", "$defs"} {
			m, _ := s[k].(map[string]any)
			for name, sub := range m {
				walk(sub, path+"."+name)
			}
		}
		walk(s["items"], path+"[]")
		subs, _ := s["anyOf"].([]any)
		for i, sub := range subs {
			walk(sub, fmt.Sprintf("%s.anyOf[%d]", path, i))
		}
	}
	walk(schema, "$")
	return errs
}

func TestGuideCheckerCatchesViolations(t *testing.T) {
	ok := `{"type":"object","properties":{"a":{"type":"string","format":"uuid","pattern":"^a"},"n":{"anyOf":[{"type":"integer","minimum":0,"maximum":9},{"type":"null"}]},"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2}},"required":["a","n","l"],"additionalProperties":false}`
	if errs := guideViolations(decodeSchema(t, ok)); len(errs) > 0 {
		t.Fatalf("compliant schema flagged: %v", errs)
	}
	bad := map[string]string{
		"format uri":        `{"type":"object","required":[],"properties":{"u":{"type":"string","format":"uri"}}}`,
		"minLength":         `{"type":"object","required":[],"properties":{"s":{"type":"string","minLength":1}}}`,
		"default in anyOf":  `{"type":"object","required":[],"properties":{"s":{"anyOf":[{"type":"string","default":"x"},{"type":"null"}]}}}`,
		"uniqueItems":       `{"type":"object","required":[],"properties":{"l":{"type":"array","uniqueItems":true}}}`,
		"contentEncoding":   `{"type":"object","required":[],"properties":{"b":{"type":"string","contentEncoding":"base64"}}}`,
		"examples in items": `{"type":"object","required":[],"properties":{"l":{"type":"array","items":{"type":"string","examples":["x"]}}}}`,
		"format in $defs":   `{"type":"object","required":[],"$defs":{"d":{"type":"string","format":"uri-reference"}}}`,
		"no required":       `{"type":"object","properties":{},"additionalProperties":false}`,
	}
	for name, s := range bad {
		if errs := guideViolations(decodeSchema(t, s)); len(errs) == 0 {
			t.Errorf("%s: not flagged", name)
		}
	}
}

func decodeSchema(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test schema %s: %v", s, err)
	}
	return m
}

// The checker must catch each rule, or the tests below prove nothing.
func TestStrictCheckerCatchesViolations(t *testing.T) {
	ok := `{"type":"object","properties":{"a":{"type":"string"},"b":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["a","b"],"additionalProperties":false}`
	if errs := strictViolations(decodeSchema(t, ok)); len(errs) > 0 {
		t.Fatalf("compliant schema flagged: %v", errs)
	}
	deep := `{"type":"string"}`
	for range 11 {
		deep = `{"type":"object","properties":{"x":` + deep + `},"required":["x"],"additionalProperties":false}`
	}
	enum := make([]string, 1001)
	for i := range enum {
		enum[i] = fmt.Sprintf("%q", fmt.Sprint(i))
	}
	var many strings.Builder
	var names []string
	for i := range 5001 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `"p%d":{"type":"string"}`, i)
		names = append(names, fmt.Sprintf("%q", fmt.Sprintf("p%d", i)))
	}
	bad := map[string]string{
		"root anyOf":                `{"anyOf":[{"type":"object","properties":{},"additionalProperties":false}]}`,
		"root not object":           `{"type":"string"}`,
		"no additionalProperties":   `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		"additionalProperties true": `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":true}`,
		"not all required":          `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
		"nested open object":        `{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}},"required":["o"],"additionalProperties":false}`,
		"object in array items":     `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"}}}}},"required":["l"],"additionalProperties":false}`,
		"object in anyOf":           `{"type":"object","properties":{"o":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false},{"type":"null"}]}},"required":["o"],"additionalProperties":false}`,
		"allOf":                     `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}`,
		"oneOf":                     `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"null"}]}},"required":["a"],"additionalProperties":false}`,
		"not":                       `{"type":"object","properties":{"a":{"not":{"type":"string"}}},"required":["a"],"additionalProperties":false}`,
		"if":                        `{"type":"object","properties":{"a":{"if":{"type":"string"}}},"required":["a"],"additionalProperties":false}`,
		"dependentRequired":         `{"type":"object","properties":{},"additionalProperties":false,"dependentRequired":{}}`,
		"$schema":                   `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{},"additionalProperties":false}`,
		"$id":                       `{"$id":"x","type":"object","properties":{},"additionalProperties":false}`,
		"external $ref":             `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}},"required":["a"],"additionalProperties":false}`,
		"$ref to definitions":       `{"type":"object","properties":{"a":{"$ref":"#/definitions/a"}},"required":["a"],"additionalProperties":false}`,
		"nesting 11":                deep,
		"1001 enum values":          `{"type":"object","properties":{"e":{"type":"string","enum":[` + strings.Join(enum, ",") + `]}},"required":["e"],"additionalProperties":false}`,
		"5001 properties":           `{"type":"object","properties":{` + many.String() + `},"required":[` + strings.Join(names, ",") + `],"additionalProperties":false}`,
	}
	for name, s := range bad {
		if errs := strictViolations(decodeSchema(t, s)); len(errs) == 0 {
			t.Errorf("%s: not flagged", name)
		}
	}
	// $ref to #/$defs and nesting of exactly 10 are fine.
	okRef := `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"required":["a"],"additionalProperties":false,"$defs":{"a":{"type":"string"}}}`
	if errs := strictViolations(decodeSchema(t, okRef)); len(errs) > 0 {
		t.Errorf("$ref to $defs flagged: %v", errs)
	}
	ten := `{"type":"string"}`
	for range 10 {
		ten = `{"type":"object","properties":{"x":` + ten + `},"required":["x"],"additionalProperties":false}`
	}
	if errs := strictViolations(decodeSchema(t, ten)); len(errs) > 0 {
		t.Errorf("nesting 10 flagged: %v", errs)
	}
}

// Input types covering what a tool declaration uses.

type flatIn struct {
	Name   string  `json:"name"`
	Count  int     `json:"count"`
	Price  float64 `json:"price"`
	Active bool    `json:"active"`
	NoTag  string
	hidden string //nolint:unused // must not appear in the schema
	Skip   string `json:"-"`
}

type optionalIn struct {
	Required string   `json:"required"`
	Note     string   `json:"note,omitempty" jsonschema:"description=A free-text note"`
	Limit    int      `json:"limit,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Zero     int      `json:"zero,omitzero"`
}

type pointerIn struct {
	Ptr      *int    `json:"ptr"`
	PtrOpt   *string `json:"ptr_opt,omitempty"`
	PtrToPtr **bool  `json:"ptr_to_ptr,omitempty"`
}

type address struct {
	Street string `json:"street" jsonschema:"description=Street and number"`
	City   string `json:"city"`
	Zip    string `json:"zip,omitempty"`
}

type nestedIn struct {
	Ship    address  `json:"ship"`
	Bill    *address `json:"bill,omitempty"`
	Contact struct {
		Email string `json:"email"`
		Phone string `json:"phone,omitempty"`
	} `json:"contact"`
}

type lineItem struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type sliceIn struct {
	Items    []lineItem   `json:"items"`
	Opt      []lineItem   `json:"opt,omitempty"`
	Ptrs     []*lineItem  `json:"ptrs"`
	Matrix   [][]int      `json:"matrix"`
	Fixed    [3]string    `json:"fixed"`
	Grouped  [][]lineItem `json:"grouped"`
	Strings  []string     `json:"strings"`
	Nullable []*string    `json:"nullable,omitempty"`
}

type enumIn struct {
	Kind     string `json:"kind" jsonschema:"enum=refund,enum=credit"`
	Priority int    `json:"priority" jsonschema:"enum=1,enum=2,enum=3"`
	Mode     string `json:"mode,omitempty" jsonschema:"enum=fast,enum=slow"`
}

type descIn struct {
	OrderID string `json:"order_id" jsonschema:"description=The order to refund"`
	Reason  string `json:"reason,omitempty" jsonschema:"description=Why the refund is made"`
	Amount  int    `json:"amount" jsonschema:"description=Amount in cents,minimum=1"`
	// Descriptions with commas, whole: escaped, and in a tag of their own.
	Ref  string `json:"ref" jsonschema:"description=The order reference\\, e.g. ORDER-7."`
	Note string `json:"note" jsonschema_description:"Shown to the customer, as written, in their language."`
}

type timeIn struct {
	At    time.Time  `json:"at"`
	Until *time.Time `json:"until,omitempty"`
	Dur   int64      `json:"dur"`
}

type embeddedBase struct {
	Tenant string `json:"tenant"`
}

type embeddedIn struct {
	embeddedBase
	Name string `json:"name"`
}

// deep10 nests structs so that the innermost property is at depth 10,
// the deepest strict mode allows.
type (
	d10 struct {
		V string `json:"v"`
	}
	d9 struct {
		N d10 `json:"n"`
	}
	d8 struct {
		N d9 `json:"n"`
	}
	d7 struct {
		N d8 `json:"n"`
	}
	d6 struct {
		N d7 `json:"n"`
	}
	d5 struct {
		N d6 `json:"n"`
	}
	d4 struct {
		N d5 `json:"n"`
	}
	d3 struct {
		N d4 `json:"n"`
	}
	d2 struct {
		N d3 `json:"n"`
	}
	deep10 struct {
		N d2 `json:"n"`
	}
)

type namedSchema struct {
	name   string
	schema func() (*toolset.Schema, error)
}

var strictCases = []namedSchema{
	{"flat", toolset.SchemaFor[flatIn]},
	{"optional", toolset.SchemaFor[optionalIn]},
	{"pointer", toolset.SchemaFor[pointerIn]},
	{"pointer_root", toolset.SchemaFor[*flatIn]},
	{"nested", toolset.SchemaFor[nestedIn]},
	{"slices", toolset.SchemaFor[sliceIn]},
	{"enum", toolset.SchemaFor[enumIn]},
	{"desc", toolset.SchemaFor[descIn]},
	{"time", toolset.SchemaFor[timeIn]},
	{"embedded", toolset.SchemaFor[embeddedIn]},
	{"empty", toolset.SchemaFor[struct{}]},
	{"deep10", toolset.SchemaFor[deep10]},
	{"rich", toolset.SchemaFor[richIn]},
	{"example", toolset.SchemaFor[GetOrderIn]},
	{"refund", toolset.SchemaFor[refundIn]},
	{"formats", toolset.SchemaFor[formatsIn]},
	{"ints", toolset.SchemaFor[intsIn]},
	{"recursive_pointer", toolset.SchemaFor[node]},
	{"recursive_slice", toolset.SchemaFor[tree]},
	{"recursive_mutual", toolset.SchemaFor[mutualA]},
	{"recursive_def", toolset.SchemaFor[wrapsRecursive]},
}

func schemaMap(t *testing.T, s *toolset.Schema) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.JSON(), &m); err != nil {
		t.Fatalf("schema is not JSON: %v\n%s", err, s.JSON())
	}
	return m
}

var update = flag.Bool("update", false, "rewrite the golden schema files in "+goldenDir)

// goldenDir holds one indented schema per strict case, <name>.json.
const goldenDir = "testdata/golden"

// Every case's schema equals its golden file (run with -update to rewrite
// them) and is within the strict subset; no golden file lacks a case.
func TestSchemasAreStrict(t *testing.T) {
	names := map[string]bool{}
	for _, c := range strictCases {
		names[c.name+".json"] = true
		t.Run(c.name, func(t *testing.T) {
			s, err := c.schema()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, s.JSON())
			m := schemaMap(t, s)
			if errs := append(strictViolations(m), guideViolations(m)...); len(errs) > 0 {
				t.Errorf("schema violates strict mode:\n%s\n%s", strings.Join(errs, "\n"), s.JSON())
			}
			// Map agrees with JSON.
			if got := s.Map(); !jsonEqual(got, m) {
				t.Errorf("Map() = %v, want %v", got, m)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("golden file %s has no case in strictCases", f)
		}
	}
}

// checkGolden compares a schema with testdata/golden/<name>.json, or
// rewrites the file under -update.
func checkGolden(t *testing.T, name string, schema []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, schema, "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	file := filepath.Join(goldenDir, name+".json")
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./toolset -run TestSchemasAreStrict -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("schema differs from %s (rerun with -update if the change is meant):\n%s", file, got.Bytes())
	}
}

// prop returns the schema of a property at a dotted path; each step goes
// through "properties", following anyOf[0] and items where needed.
func prop(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	cur := m
	for _, p := range path {
		switch p {
		case "[]":
			cur, _ = cur["items"].(map[string]any)
		case "?":
			branches, _ := cur["anyOf"].([]any)
			if len(branches) == 0 {
				t.Fatalf("no anyOf at %v in %v", path, cur)
			}
			cur, _ = branches[0].(map[string]any)
		default:
			props, _ := cur["properties"].(map[string]any)
			cur, _ = props[p].(map[string]any)
		}
		if cur == nil {
			t.Fatalf("no %v in schema %v", path, m)
		}
	}
	return cur
}

func requiredOf(m map[string]any) []string {
	var out []string
	for _, r := range m["required"].([]any) {
		out = append(out, r.(string))
	}
	sort.Strings(out)
	return out
}

func propNames(m map[string]any) []string {
	var out []string
	for k := range m["properties"].(map[string]any) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isNullable(s map[string]any) bool {
	branches, ok := s["anyOf"].([]any)
	if !ok || len(branches) != 2 {
		return false
	}
	null, _ := branches[1].(map[string]any)
	return len(null) == 1 && null["type"] == "null"
}

func mustSchema[T any](t *testing.T) map[string]any {
	t.Helper()
	s, err := toolset.SchemaFor[T]()
	if err != nil {
		t.Fatal(err)
	}
	return schemaMap(t, s)
}

func TestSchemaShapes(t *testing.T) {
	t.Run("flat", func(t *testing.T) {
		m := mustSchema[flatIn](t)
		want := []string{"NoTag", "active", "count", "name", "price"}
		if got := propNames(m); !slices.Equal(got, want) {
			t.Errorf("properties %v, want %v (unexported and json:\"-\" excluded)", got, want)
		}
		if got := requiredOf(m); !slices.Equal(got, want) {
			t.Errorf("required %v, want %v", got, want)
		}
		for name, typ := range map[string]string{"name": "string", "count": "integer", "price": "number", "active": "boolean"} {
			if got := prop(t, m, name)["type"]; got != typ {
				t.Errorf("%s: type %v, want %s", name, got, typ)
			}
		}
		for _, k := range []string{"$schema", "$id", "$defs", "definitions", "$ref"} {
			if _, ok := m[k]; ok {
				t.Errorf("root has %s", k)
			}
		}
	})
	t.Run("optional", func(t *testing.T) {
		m := mustSchema[optionalIn](t)
		all := []string{"limit", "note", "required", "tags", "zero"}
		if got := requiredOf(m); !slices.Equal(got, all) {
			t.Errorf("required %v, want all properties %v", got, all)
		}
		if isNullable(prop(t, m, "required")) {
			t.Error("non-omitempty field is nullable")
		}
		for name, typ := range map[string]string{"note": "string", "limit": "integer", "tags": "array", "zero": "string"} {
			p := prop(t, m, name)
			if !isNullable(p) {
				t.Errorf("optional %s is not anyOf[…, null]: %v", name, p)
				continue
			}
			if name == "zero" {
				typ = "integer"
			}
			if got := prop(t, m, name, "?")["type"]; got != typ {
				t.Errorf("optional %s: inner type %v, want %s", name, got, typ)
			}
		}
		// The description stays on the union, not on the branch.
		if got := prop(t, m, "note")["description"]; got != "A free-text note" {
			t.Errorf("note description %v", got)
		}
		if _, ok := prop(t, m, "note", "?")["description"]; ok {
			t.Error("description duplicated into anyOf branch")
		}
	})
	t.Run("pointer", func(t *testing.T) {
		m := mustSchema[pointerIn](t)
		// A pointer reads null as nil, omitempty or not.
		if p := prop(t, m, "ptr"); !isNullable(p) || prop(t, m, "ptr", "?")["type"] != "integer" {
			t.Errorf("pointer without omitempty: %v", p)
		}
		if p := prop(t, m, "ptr_opt"); !isNullable(p) || prop(t, m, "ptr_opt", "?")["type"] != "string" {
			t.Errorf("pointer with omitempty: %v", p)
		}
		if p := prop(t, m, "ptr_to_ptr", "?"); p["type"] != "boolean" {
			t.Errorf("pointer to pointer: %v", p)
		}
	})
	t.Run("nested", func(t *testing.T) {
		m := mustSchema[nestedIn](t)
		ship := prop(t, m, "ship")
		if ship["type"] != "object" || ship["additionalProperties"] != false {
			t.Errorf("nested struct: %v", ship)
		}
		if got := requiredOf(ship); !slices.Equal(got, []string{"city", "street", "zip"}) {
			t.Errorf("nested required %v", got)
		}
		if !isNullable(prop(t, m, "ship", "zip")) {
			t.Error("nested optional field not nullable")
		}
		if got := prop(t, m, "ship", "street")["description"]; got != "Street and number" {
			t.Errorf("nested description %v", got)
		}
		bill := prop(t, m, "bill")
		if !isNullable(bill) || prop(t, m, "bill", "?")["additionalProperties"] != false {
			t.Errorf("optional nested pointer: %v", bill)
		}
		if got := requiredOf(prop(t, m, "contact")); !slices.Equal(got, []string{"email", "phone"}) {
			t.Errorf("anonymous struct required %v", got)
		}
	})
	t.Run("slices", func(t *testing.T) {
		m := mustSchema[sliceIn](t)
		items := prop(t, m, "items", "[]")
		if items["type"] != "object" || items["additionalProperties"] != false {
			t.Errorf("slice of structs items: %v", items)
		}
		if got := requiredOf(items); !slices.Equal(got, []string{"qty", "sku"}) {
			t.Errorf("items required %v", got)
		}
		if prop(t, m, "opt", "?", "[]")["additionalProperties"] != false {
			t.Error("optional slice of structs not closed")
		}
		if p := prop(t, m, "ptrs", "[]"); !isNullable(p) || prop(t, m, "ptrs", "[]", "?")["type"] != "object" {
			t.Errorf("slice of pointers to structs: items %v", p)
		}
		if prop(t, m, "matrix", "[]", "[]")["type"] != "integer" {
			t.Error("slice of slices")
		}
		if prop(t, m, "grouped", "[]", "[]")["additionalProperties"] != false {
			t.Error("slice of slices of structs not closed")
		}
		f := prop(t, m, "fixed")
		if f["type"] != "array" || f["minItems"] != 3.0 || f["maxItems"] != 3.0 {
			t.Errorf("array: %v", f)
		}
	})
	t.Run("enum", func(t *testing.T) {
		m := mustSchema[enumIn](t)
		if got := prop(t, m, "kind")["enum"]; !jsonEqual(got, []any{"refund", "credit"}) {
			t.Errorf("kind enum %v", got)
		}
		if got := prop(t, m, "priority")["enum"]; !jsonEqual(got, []any{1.0, 2.0, 3.0}) {
			t.Errorf("priority enum %v", got)
		}
		if got := prop(t, m, "mode", "?")["enum"]; !jsonEqual(got, []any{"fast", "slow"}) {
			t.Errorf("optional mode enum %v", got)
		}
	})
	t.Run("desc", func(t *testing.T) {
		m := mustSchema[descIn](t)
		if got := prop(t, m, "order_id")["description"]; got != "The order to refund" {
			t.Errorf("description %v", got)
		}
		if got := prop(t, m, "reason")["description"]; got != "Why the refund is made" {
			t.Errorf("optional description %v", got)
		}
		if got := prop(t, m, "amount")["minimum"]; got != 1.0 {
			t.Errorf("minimum %v", got)
		}
	})
	t.Run("time", func(t *testing.T) {
		m := mustSchema[timeIn](t)
		at := prop(t, m, "at")
		if at["type"] != "string" || at["format"] != "date-time" {
			t.Errorf("time.Time: %v", at)
		}
		if u := prop(t, m, "until", "?"); u["type"] != "string" || u["format"] != "date-time" {
			t.Errorf("*time.Time: %v", u)
		}
	})
	t.Run("embedded", func(t *testing.T) {
		m := mustSchema[embeddedIn](t)
		// encoding/json promotes embedded fields; the schema must describe
		// the same object.
		want := []string{"name", "tenant"}
		if got := propNames(m); !slices.Equal(got, want) {
			t.Errorf("embedded struct properties %v, want %v", got, want)
		}
	})
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// strictcheckPath is the project's reference checker, relative to this
// package's directory (the module root's ../shared/tools).
const strictcheckPath = "../../shared/tools/strictcheck.py"

func TestSchemasPassStrictcheckPy(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs(strictcheckPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("reference checker %s not found: %v", strictcheckPath, err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	// The golden files are the schemas the cases produce
	// (TestSchemasAreStrict), one schema a file.
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(strictCases) {
		t.Fatalf("%d golden files for %d cases", len(files), len(strictCases))
	}
	out, err := exec.Command(python, append([]string{script}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("strictcheck.py failed: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%d passed, 0 failed", len(files)); !strings.Contains(string(out), want) {
		t.Errorf("strictcheck.py output %q, want %q", out, want)
	}

	// And the reference checker does reject a non-strict schema, so the
	// exit status above means something.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, script, bad).CombinedOutput(); err == nil {
		t.Errorf("strictcheck.py accepted a non-strict schema: %s", out)
	}
}
