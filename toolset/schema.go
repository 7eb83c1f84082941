package toolset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a tool's input schema: the JSON Schema derived from the input
// struct and made acceptable to OpenAI's strict mode, and the same schema
// compiled for validation. The model is given exactly the schema the
// arguments are validated against.
type Schema struct {
	json     []byte
	compiled *jsonschema.Schema
}

// JSON returns the schema's JSON text. Callers must not modify it.
func (s *Schema) JSON() json.RawMessage { return s.json }

// Map returns a fresh decoded copy of the schema, for APIs that take one
// (e.g. openai-go's FunctionToolParam.Parameters).
func (s *Schema) Map() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(s.json, &m)
	return m
}

// Validate checks a parsed JSON value (nil, bool, string, json.Number,
// []any, map[string]any) against the schema.
func (s *Schema) Validate(v any) error { return s.compiled.Validate(v) }

var schemaCache sync.Map // reflect.Type -> *Schema or error

// SchemaFor derives the strict schema of T, a struct type, once per type.
//
// The rules, which are OpenAI's strict-mode subset: every object lists all
// its properties in "required" and has "additionalProperties": false; a
// field that Go marks optional (omitempty or omitzero in its json tag)
// becomes a union with null ("anyOf": [schema, {"type": "null"}]) and
// decodes to its zero value when null; no "$schema", "$id" or "$ref".
// Descriptions and enums come from jsonschema struct tags
// (`jsonschema:"description=…,enum=a,enum=b"`); a description with a comma
// goes in its own tag, `jsonschema_description:"…"`, as the jsonschema tag
// splits on commas. Maps, interfaces and
// recursive types cannot be expressed in strict mode and are rejected, as
// are types over its limits (nesting deeper than 10 levels, more than 5000
// properties, more than 1000 enum values).
func SchemaFor[T any]() (*Schema, error) {
	return schemaForType(reflect.TypeFor[T]())
}

func schemaForType(t reflect.Type) (*Schema, error) {
	if v, ok := schemaCache.Load(t); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.(*Schema), nil
	}
	s, err := buildSchema(t)
	if err != nil {
		schemaCache.Store(t, err)
		return nil, err
	}
	v, _ := schemaCache.LoadOrStore(t, s)
	return v.(*Schema), nil
}

func buildSchema(t reflect.Type) (*Schema, error) {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base.Kind() != reflect.Struct {
		return nil, fmt.Errorf("toolset: input type %v is not a struct: tool arguments are a JSON object", t)
	}
	if err := checkType(base, nil); err != nil {
		return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
	}
	r := invopop.Reflector{DoNotReference: true, Anonymous: true, ExpandedStruct: true}
	s := r.ReflectFromType(base)
	if err := strictify(s, "$"); err != nil {
		return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
	}
	props := 0
	if err := checkLimits(s, "$", 0, &props); err != nil {
		return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
	}
	s.Version, s.ID, s.Definitions = "", "", nil
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // a "date-time" the model invents is INVALID_ARGUMENTS with the reason
	const url = "toolguard:///input.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	return &Schema{json: raw, compiled: compiled}, nil
}

// checkType rejects what strict mode cannot express before reflection
// (recursion would not terminate there).
func checkType(t reflect.Type, path []reflect.Type) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map:
		return fmt.Errorf("map type %v: strict mode needs every property named", t)
	case reflect.Interface:
		return fmt.Errorf("interface type %v: strict mode needs a concrete type", t)
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Errorf("type %v has no JSON form", t)
	case reflect.Struct:
		for _, p := range path {
			if p == t {
				return fmt.Errorf("recursive type %v: strict schemas are inlined", t)
			}
		}
		if t.PkgPath() == "time" && t.Name() == "Time" {
			return nil
		}
		path = append(path, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if err := checkType(f.Type, path); err != nil {
				return err
			}
		}
	}
	return nil
}

var errAny = errors.New("a value without a type cannot be expressed in strict mode")

// strictify rewrites s in place into OpenAI's strict subset.
func strictify(s *invopop.Schema, path string) error {
	if s == nil {
		return fmt.Errorf("%s: %w", path, errAny)
	}
	if s.Ref != "" {
		return fmt.Errorf("%s: $ref is not allowed", path)
	}
	s.Version, s.ID = "", ""
	switch s.Type {
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties != invopop.FalseSchema {
			return fmt.Errorf("%s: open objects are not allowed in strict mode", path)
		}
		s.AdditionalProperties = invopop.FalseSchema
		if len(s.PatternProperties) > 0 {
			return fmt.Errorf("%s: patternProperties are not allowed in strict mode", path)
		}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		s.Required = s.Required[:0]
		if s.Properties != nil {
			for p := s.Properties.Oldest(); p != nil; p = p.Next() {
				if err := strictify(p.Value, path+"."+p.Key); err != nil {
					return err
				}
				if !required[p.Key] {
					p.Value = nullable(p.Value)
				}
				s.Required = append(s.Required, p.Key)
			}
		}
	case "array":
		if err := strictify(s.Items, path+"[]"); err != nil {
			return err
		}
	case "string", "integer", "number", "boolean", "null":
	case "":
		if len(s.AnyOf) == 0 {
			return fmt.Errorf("%s: %w", path, errAny)
		}
		for i, sub := range s.AnyOf {
			if err := strictify(sub, fmt.Sprintf("%s.anyOf[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s: type %q is not allowed", path, s.Type)
	}
	if len(s.OneOf) > 0 || len(s.AllOf) > 0 || s.Not != nil || s.If != nil {
		return fmt.Errorf("%s: oneOf, allOf, not and if are not allowed in strict mode", path)
	}
	return nil
}

// Strict mode's size limits.
const (
	maxNesting    = 10
	maxProperties = 5000
	maxEnumValues = 1000
)

// checkLimits rejects a schema over strict mode's size limits, counting
// nesting as OpenAI does: one level per property or array item, none per
// anyOf branch.
func checkLimits(s *invopop.Schema, path string, depth int, props *int) error {
	if s == nil {
		return nil
	}
	if depth > maxNesting {
		return fmt.Errorf("%s: nested deeper than %d levels, the strict-mode limit", path, maxNesting)
	}
	if len(s.Enum) > maxEnumValues {
		return fmt.Errorf("%s: more than %d enum values, the strict-mode limit", path, maxEnumValues)
	}
	if s.Properties != nil {
		*props += s.Properties.Len()
		if *props > maxProperties {
			return fmt.Errorf("more than %d properties, the strict-mode limit", maxProperties)
		}
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			if err := checkLimits(p.Value, path+"."+p.Key, depth+1, props); err != nil {
				return err
			}
		}
	}
	if err := checkLimits(s.Items, path+"[]", depth+1, props); err != nil {
		return err
	}
	for i, sub := range s.AnyOf {
		if err := checkLimits(sub, fmt.Sprintf("%s.anyOf[%d]", path, i), depth, props); err != nil {
			return err
		}
	}
	return nil
}

// nullable turns an optional property's schema into a union with null,
// keeping its description on the union.
func nullable(s *invopop.Schema) *invopop.Schema {
	desc := s.Description
	s.Description = ""
	return &invopop.Schema{Description: desc, AnyOf: []*invopop.Schema{s, {Type: "null"}}}
}

// validationMessage turns a validator error into short text for the model:
// where in the arguments and what is wrong, never the schema's location.
func validationMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "The arguments do not match the tool's schema."
	}
	var parts []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil || len(parts) >= 5 {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		msg := u.Error.String()
		if strings.HasPrefix(msg, "validation failed") {
			continue
		}
		parts = append(parts, "at "+loc+": "+truncate(msg, 200))
	}
	if len(parts) == 0 {
		return "The arguments do not match the tool's schema."
	}
	return "The arguments do not match the tool's schema: " + strings.Join(parts, "; ") + "."
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
