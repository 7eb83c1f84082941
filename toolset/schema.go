package toolset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a tool's input schema: its JSON text and the same schema
// compiled for validation, so the model is given exactly the schema the
// arguments are validated against. SchemaFor derives it from an input
// struct in OpenAI's strict subset; CompileSchema takes any JSON Schema,
// such as a remote MCP tool's inputSchema.
type Schema struct {
	json     []byte
	compiled *jsonschema.Schema
	strict   bool
}

// JSON returns the schema's JSON text. Callers must not modify it.
func (s *Schema) JSON() json.RawMessage { return s.json }

// Strict reports whether the schema is in OpenAI's strict subset as
// SchemaFor derives it (every property required, optional ones nullable,
// no open objects), so providers may declare the tool strict and read an
// absent nullable member as null. A schema from CompileSchema is not, even
// when its text happens to fit: it is sent as is, without strict mode.
func (s *Schema) Strict() bool { return s.strict }

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

// CompileSchema compiles raw, any JSON Schema (2020-12 unless it names
// its draft with "$schema"), for validation; the schema's JSON is a copy of
// raw, and it is not Strict. Formats are annotations, as the draft says,
// not assertions. It is for schemas written elsewhere, such as a remote MCP
// tool's inputSchema; a Go input type's schema comes from SchemaFor.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	raw = bytes.Clone(raw)
	compiled, err := compile(raw, false)
	if err != nil {
		return nil, fmt.Errorf("toolset: compiling the schema: %w", err)
	}
	return &Schema{json: raw, compiled: compiled}, nil
}

// compile compiles the JSON Schema raw, JSON Schema 2020-12 unless it
// names its draft, asserting formats when assertFormat is set.
func compile(raw []byte, assertFormat bool) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if assertFormat {
		c.AssertFormat()
	}
	const resource = "toolguard:///input.json"
	if err := c.AddResource(resource, doc); err != nil {
		return nil, err
	}
	return c.Compile(resource)
}

var schemaCache sync.Map // reflect.Type -> *Schema or error

// SchemaFor derives the strict schema of T, a struct type, once per type.
// The schema is OpenAI's strict-mode subset and means what encoding/json
// does with T; what cannot be both is refused here (and by Read and Write)
// with an error naming the Go field and the rule. The rules:
//
//   - Every object lists all its properties in "required" (an empty list
//     for an empty struct) and has "additionalProperties": false.
//   - A field Go marks optional (omitempty or omitzero) and any pointer,
//     also a slice element, is "anyOf": [schema, {"type": "null"}]; null
//     decodes to the zero value (nil for a pointer).
//   - A recursive type refers to itself with "$ref": "#" when it is T,
//     "#/$defs/Name" otherwise; there is no other $ref, "$schema" or "$id".
//   - Integers of 8, 16 and 32 bits carry their Go range as "minimum" and
//     "maximum", unsigned ones at least "minimum": 0 (a narrower tag range
//     stays); net.IP is anyOf formats ipv4 and ipv6; []byte is a string with
//     a pattern for standard base64; time.Time is format date-time.
//   - Only strict mode's keywords pass: pattern and format (date-time,
//     time, date, duration, email, hostname, ipv4, ipv6, uuid) for strings,
//     multipleOf, minimum, maximum and their exclusive forms for numbers,
//     minItems and maxItems for arrays, enum, title and description. Other
//     formats (uri...), minLength, maxLength, default, examples,
//     uniqueItems, readOnly and jsonschema_extras keywords are refused.
//   - Refused types: maps, interfaces, funcs, chans, complex numbers,
//     uintptr, time.Duration (nanoseconds a model misreads: use an integer
//     with the unit in its name) and url.URL (not a JSON string to
//     encoding/json: use a string). Refused jsonschema tags: nullable (use
//     a pointer), type, oneof_* and anyof_* (the Go type decides), and
//     unknown keys.
//   - Strict mode's limits: nesting of at most 10 levels; over the whole
//     schema 5000 properties, 1000 enum values, and 120,000 characters of
//     property names, definition names, enum and const values; an enum of
//     more than 250 strings at most 15,000 characters.
//
// Descriptions and enums come from jsonschema struct tags
// (`jsonschema:"description=…,enum=a,enum=b"`). The jsonschema tag splits
// on commas, so a description with a comma escapes it with a backslash
// (written `jsonschema:"description=A\\, B"`, as the tag value is a quoted
// string) or goes in its own tag, `jsonschema_description:"A, B"`; a tag entry that is no keyword (the
// rest of a description a comma cut) is refused with the field's name, so
// no description reaches the model cut short.
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
	root := base.Name()
	if root == "" {
		root = "input"
	}
	recursive := map[reflect.Type]bool{}
	if err := checkType(base, root, nil, recursive); err != nil {
		return nil, fmt.Errorf("toolset: %w", err)
	}
	// A recursive type refers to itself through $ref: "#" for the input
	// type, "#/$defs/Name" for others.
	rs := refs{}
	var defTypes []reflect.Type
	for rt := range recursive {
		if rt != base {
			defTypes = append(defTypes, rt)
		}
	}
	slices.SortFunc(defTypes, func(a, b reflect.Type) int { return strings.Compare(a.String(), b.String()) })
	if recursive[base] {
		rs[base] = "#"
	}
	names := map[string]bool{}
	for _, rt := range defTypes {
		name := rt.Name()
		for i := 2; names[name]; i++ {
			name = fmt.Sprintf("%s_%d", rt.Name(), i)
		}
		names[name] = true
		rs[rt] = "#/$defs/" + name
	}
	s := rs.reflect(base)
	if err := rs.strictify(s, base, root); err != nil {
		return nil, fmt.Errorf("toolset: %w", err)
	}
	var defs invopop.Definitions
	for _, rt := range defTypes {
		d := rs.reflect(rt)
		if err := rs.strictify(d, rt, rt.Name()); err != nil {
			return nil, fmt.Errorf("toolset: %w", err)
		}
		if defs == nil {
			defs = invopop.Definitions{}
		}
		defs[strings.TrimPrefix(rs[rt], "#/$defs/")] = d
	}
	var n size
	if err := checkLimits(s, "$", 0, &n); err != nil {
		return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
	}
	for name, d := range defs {
		if err := n.addChars(utf8.RuneCountInString(name), "$defs."+name); err != nil {
			return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
		}
		if err := checkLimits(d, "$defs."+name, 0, &n); err != nil {
			return nil, fmt.Errorf("toolset: input type %v: %w", t, err)
		}
	}
	s.Version, s.ID, s.Definitions = "", "", defs
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	// Formats are asserted: a "date-time" the model invents is
	// INVALID_ARGUMENTS with the reason.
	compiled, err := compile(raw, true)
	if err != nil {
		return nil, err
	}
	return &Schema{json: raw, compiled: compiled, strict: true}, nil
}

// Go types with a JSON form of their own.
var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	urlType      = reflect.TypeFor[url.URL]()
	ipType       = reflect.TypeFor[net.IP]()
)

// refs maps each recursive type to the $ref that stands for it.
type refs map[reflect.Type]string

// reflect has invopop reflect t, with every nested use of a recursive
// type as its $ref.
func (rs refs) reflect(t reflect.Type) *invopop.Schema {
	expand := t // the first type the Mapper sees is t itself
	r := invopop.Reflector{DoNotReference: true, Anonymous: true, ExpandedStruct: true,
		Mapper: func(m reflect.Type) *invopop.Schema {
			if m == expand {
				expand = nil
				return mapType(m)
			}
			if ref, ok := rs[m]; ok {
				return &invopop.Schema{Ref: ref}
			}
			return mapType(m)
		}}
	return r.ReflectFromType(t)
}

// mapType gives invopop the schema of Go types whose own would not mean
// what encoding/json does with them.
func mapType(t reflect.Type) *invopop.Schema {
	if t == ipType {
		// net.IP reads either family (net.ParseIP); invopop says ipv4.
		return &invopop.Schema{AnyOf: []*invopop.Schema{
			{Type: "string", Format: "ipv4"},
			{Type: "string", Format: "ipv6"},
		}}
	}
	return nil
}

// checkType rejects, before reflection and naming the Go field, what
// strict mode cannot express or what would not mean the Go type, and adds
// to recursive each struct type that contains itself (reflection must cut
// it off with a $ref).
func checkType(t reflect.Type, where string, path []reflect.Type, recursive map[reflect.Type]bool) error {
	for t != ipType && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		if t.Kind() != reflect.Pointer {
			where += "[]"
		}
		t = t.Elem()
	}
	if _, ok := textOf(t); ok {
		return fmt.Errorf("field %s: toolset.JSONText is for outputs: a model writes JSON, not JSON in a string", where)
	}
	switch t {
	case timeType, ipType:
		return nil
	case durationType:
		return fmt.Errorf("field %s: time.Duration is a JSON integer of nanoseconds, which a model misreads; use an integer field with the unit in its name (e.g. TimeoutSeconds int)", where)
	case urlType:
		return fmt.Errorf("field %s: url.URL is not a JSON string to encoding/json (and format \"uri\" is not supported by OpenAI strict mode); use a string field with a pattern, or format \"hostname\", and url.Parse it", where)
	}
	switch t.Kind() {
	case reflect.Map:
		return fmt.Errorf("field %s: map type %v: strict mode needs every property named", where, t)
	case reflect.Interface:
		return fmt.Errorf("field %s: interface type %v: strict mode needs a concrete type", where, t)
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Uintptr:
		return fmt.Errorf("field %s: type %v has no JSON form a schema can state", where, t)
	case reflect.Struct:
		if slices.Contains(path, t) {
			recursive[t] = true
			return nil
		}
		path = append(path, t)
		for _, f := range jsonFields(t, where) {
			if err := checkTag(f.field, f.where); err != nil {
				return err
			}
			if err := checkType(f.field.Type, f.where, path, recursive); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonField is a struct field encoding/json reads, and its Go name for
// messages (Type.Field, through embedded structs).
type jsonField struct {
	field reflect.StructField
	where string
}

// jsonFields returns t's fields by JSON member name, with the fields of
// embedded structs promoted as encoding/json promotes them (the shallower
// field wins a name); each field's Index is its whole index sequence from
// t (reflect.Value.FieldByIndex). It is empty when t is not a struct.
func jsonFields(t reflect.Type, where string) map[string]jsonField {
	out := map[string]jsonField{}
	depth := map[string]int{}
	var add func(t reflect.Type, where string, d int, index []int)
	add = func(t reflect.Type, where string, d int, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			f.Index = append(slices.Clip(index), i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				add(ft, where+"."+f.Name, d+1, f.Index)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if prev, ok := depth[name]; ok && prev <= d {
				continue
			}
			depth[name] = d
			out[name] = jsonField{field: f, where: where + "." + f.Name}
		}
	}
	if t != nil && t.Kind() == reflect.Struct {
		add(t, where, 0, nil)
	}
	return out
}

// tagKeys are the jsonschema struct tag keys invopop reads and whose
// keywords strictify judges; the tag keys it reads into keywords that
// cannot mean a Go field's type are refused here with the reason.
var tagKeys = map[string]string{
	"title": "", "description": "", "anchor": "", "enum": "", "default": "", "example": "",
	"minLength": "", "maxLength": "", "pattern": "", "format": "", "readOnly": "", "writeOnly": "",
	"multipleOf": "", "minimum": "", "maximum": "", "exclusiveMinimum": "", "exclusiveMaximum": "",
	"minItems": "", "maxItems": "", "uniqueItems": "",
	"type":           "the JSON type comes from the Go type, which is what the arguments decode into",
	"oneof_type":     "a Go field decodes into one type, and strict mode has no oneOf",
	"anyof_type":     "a Go field decodes into one type",
	"oneof_ref":      "strict mode has no oneOf, and refs come from the Go types",
	"anyof_ref":      "refs come from the Go types",
	"oneof_required": "strict mode has no oneOf and requires every property",
	"anyof_required": "strict mode requires every property",
}

// checkTag refuses jsonschema tag entries that would make the schema say
// something other than the Go type, or that invopop would drop silently.
func checkTag(f reflect.StructField, where string) error {
	for _, entry := range splitTag(f.Tag.Get("jsonschema")) {
		key, _, isPair := strings.Cut(entry, "=")
		if !isPair {
			switch entry {
			case "nullable":
				return fmt.Errorf("field %s: jsonschema tag \"nullable\" is not supported: make the field a pointer or omitempty, which the schema states as anyOf [T, null]", where)
			case "required", "-", "":
				continue
			}
			// invopop would drop it without a word: text after a comma,
			// most often the rest of a description the comma cut.
			return fmt.Errorf("field %s: jsonschema tag entry %q is not a keyword: a comma ends a tag entry, so a description's comma cuts it there; write it as \\, or put the description in a jsonschema_description tag", where, entry)
		}
		reason, known := tagKeys[key]
		switch {
		case !known:
			return fmt.Errorf("field %s: jsonschema tag key %q is unknown (a description with a comma goes in its own jsonschema_description tag)", where, key)
		case reason != "":
			return fmt.Errorf("field %s: jsonschema tag %q is not supported: %s", where, key, reason)
		}
	}
	return nil
}

// splitTag splits a jsonschema tag on commas not escaped with a backslash,
// as invopop does.
func splitTag(tag string) []string {
	var out []string
	start := 0
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' && (i == 0 || tag[i-1] != '\\') {
			out = append(out, tag[start:i])
			start = i + 1
		}
	}
	return append(out, tag[start:])
}

var errAny = errors.New("a value without a type cannot be expressed in strict mode")

// strictify rewrites s, the schema invopop reflected for Go type t, in
// place into OpenAI's strict subset, or says which Go field (where) it
// cannot. t is nil where the schema does not follow a Go type (a custom
// JSONSchema method).
func (rs refs) strictify(s *invopop.Schema, t reflect.Type, where string) error {
	if s == nil {
		return fmt.Errorf("field %s: %w", where, errAny)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s.Ref != "" {
		if t != nil && rs[t] == s.Ref {
			return nil // a recursive type's own $ref
		}
		return fmt.Errorf("field %s: $ref %q is not one toolset made for a recursive type", where, s.Ref)
	}
	s.Version, s.ID = "", ""
	if s.ContentEncoding == "base64" && s.Type == "string" && t != nil && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		// []byte is standard base64 to encoding/json: say so with a pattern.
		s.ContentEncoding, s.Pattern = "", base64Pattern
	}
	if err := checkKeywords(s, where); err != nil {
		return err
	}
	switch s.Type {
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties != invopop.FalseSchema {
			return fmt.Errorf("field %s: open objects are not allowed in strict mode", where)
		}
		s.AdditionalProperties = invopop.FalseSchema
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		s.Required = s.Required[:0]
		fields := jsonFields(t, where)
		if s.Properties != nil {
			for p := s.Properties.Oldest(); p != nil; p = p.Next() {
				var ft reflect.Type
				fw := where + "." + p.Key
				if f, ok := fields[p.Key]; ok {
					ft, fw = f.field.Type, f.where
				}
				if err := rs.strictify(p.Value, ft, fw); err != nil {
					return err
				}
				if !required[p.Key] || isPointer(ft) {
					p.Value = nullable(p.Value)
				}
				s.Required = append(s.Required, p.Key)
			}
		}
		if len(s.Required) == 0 {
			// Strict mode wants the list even when empty; invopop omits it.
			s.Extras = map[string]any{"required": []string{}}
		}
	case "array":
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		if err := rs.strictify(s.Items, et, where+"[]"); err != nil {
			return err
		}
		if isPointer(et) {
			s.Items = nullable(s.Items)
		}
	case "integer":
		intBounds(s, t)
	case "string", "number", "boolean", "null":
	case "":
		if len(s.AnyOf) == 0 {
			return fmt.Errorf("field %s: %w", where, errAny)
		}
		for _, sub := range s.AnyOf {
			if err := rs.strictify(sub, nil, where); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("field %s: type %q is not allowed", where, s.Type)
	}
	return nil
}

// isPointer reports whether t is a pointer: encoding/json reads null into
// it as nil, so its schema is a union with null.
func isPointer(t reflect.Type) bool { return t != nil && t.Kind() == reflect.Pointer }

// base64Pattern matches exactly the standard, padded base64 that
// encoding/json reads into a []byte.
const base64Pattern = `^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`

// strictKeywords are the keywords OpenAI's strict mode accepts (its
// Structured Outputs guide, "Supported properties"); strictFormats are the
// string formats it accepts. keywordAdvice says what to do instead of a
// keyword it does not.
var (
	strictKeywords = map[string]bool{
		"type": true, "description": true, "title": true, "enum": true, "const": true,
		"properties": true, "required": true, "additionalProperties": true, "items": true,
		"anyOf": true, "$ref": true, "$defs": true, "pattern": true, "format": true,
		"multipleOf": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
		"minItems": true, "maxItems": true,
	}
	strictFormats = map[string]bool{
		"date-time": true, "time": true, "date": true, "duration": true, "email": true,
		"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
	}
	keywordAdvice = map[string]string{
		"minLength":   "use a pattern such as ^.{1,64}$",
		"maxLength":   "use a pattern such as ^.{1,64}$",
		"default":     "strict mode sends every property, and an omitempty field arrives as null: apply the default in the tool",
		"examples":    "put examples in the description",
		"uniqueItems": "remove duplicates in the tool",
		"oneOf":       "strict mode has anyOf only",
	}
)

// checkKeywords refuses a keyword or format of s itself (not of its
// subschemas) outside strict mode's supported list.
func checkKeywords(s *invopop.Schema, where string) error {
	if s.Format != "" && !strictFormats[s.Format] {
		return fmt.Errorf("field %s: format %q is not supported by OpenAI strict mode; use a string with a pattern, or one of its formats (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid)", where, s.Format)
	}
	own := *s
	own.Properties, own.Items, own.AnyOf, own.Definitions = nil, nil, nil, nil
	raw, err := json.Marshal(&own)
	if err != nil {
		return fmt.Errorf("field %s: %w", where, err)
	}
	var keys map[string]json.RawMessage // stays empty for "true", invopop's empty schema
	_ = json.Unmarshal(raw, &keys)
	names := make([]string, 0, len(keys))
	for k := range keys {
		if !strictKeywords[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	msg := fmt.Sprintf("field %s: %s is not supported by OpenAI strict mode", where, names[0])
	if advice := keywordAdvice[names[0]]; advice != "" {
		msg += "; " + advice
	}
	return errors.New(msg)
}

// intBounds states the range of a sized or unsigned Go integer (the
// 64-bit ones are checked when decoding), keeping a narrower range a tag
// gave.
func intBounds(s *invopop.Schema, t reflect.Type) {
	if t == nil {
		return
	}
	var lo, hi int64
	switch t.Kind() {
	case reflect.Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case reflect.Int16:
		lo, hi = math.MinInt16, math.MaxInt16
	case reflect.Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case reflect.Uint8:
		hi = math.MaxUint8
	case reflect.Uint16:
		hi = math.MaxUint16
	case reflect.Uint32:
		hi = math.MaxUint32
	case reflect.Uint, reflect.Uint64:
		hi = -1 // no upper bound stated
	default:
		return
	}
	if f, err := s.Minimum.Float64(); err != nil || f < float64(lo) {
		s.Minimum = json.Number(strconv.FormatInt(lo, 10))
	}
	if f, err := s.Maximum.Float64(); hi >= 0 && (err != nil || f > float64(hi)) {
		s.Maximum = json.Number(strconv.FormatInt(hi, 10))
	}
}

// Strict mode's size limits, as OpenAI's Structured Outputs documents
// them ("Supported schemas"): nesting, properties and enum values are
// counted over the whole schema, $defs included.
const (
	maxNesting    = 10
	maxProperties = 5000
	// maxEnumValues bounds the enum values of all enums together.
	maxEnumValues = 1000
	// An enum of string values with more than largeEnum values may hold at
	// most maxLargeEnumChars characters in all.
	largeEnum         = 250
	maxLargeEnumChars = 15000
	// maxNameChars bounds the characters of every property name,
	// definition name, enum value and const value together.
	maxNameChars = 120000
)

// size counts what checkLimits bounds over a whole schema.
type size struct {
	props, enums, chars int
}

// checkLimits rejects a schema over strict mode's size limits, counting
// nesting as OpenAI does: one level per property or array item, none per
// anyOf branch.
func checkLimits(s *invopop.Schema, path string, depth int, n *size) error {
	if s == nil {
		return nil
	}
	if depth > maxNesting {
		return fmt.Errorf("%s: nested deeper than %d levels, the strict-mode limit", path, maxNesting)
	}
	if err := n.countEnum(s, path); err != nil {
		return err
	}
	if s.Properties != nil {
		n.props += s.Properties.Len()
		if n.props > maxProperties {
			return fmt.Errorf("more than %d properties, the strict-mode limit", maxProperties)
		}
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			if err := n.addChars(utf8.RuneCountInString(p.Key), path); err != nil {
				return err
			}
			if err := checkLimits(p.Value, path+"."+p.Key, depth+1, n); err != nil {
				return err
			}
		}
	}
	if err := checkLimits(s.Items, path+"[]", depth+1, n); err != nil {
		return err
	}
	for i, sub := range s.AnyOf {
		if err := checkLimits(sub, fmt.Sprintf("%s.anyOf[%d]", path, i), depth, n); err != nil {
			return err
		}
	}
	return nil
}

// countEnum counts the enum and const values of s.
func (n *size) countEnum(s *invopop.Schema, path string) error {
	n.enums += len(s.Enum)
	if n.enums > maxEnumValues {
		return fmt.Errorf("%s: more than %d enum values in the schema, the strict-mode limit", path, maxEnumValues)
	}
	chars, strs := 0, 0
	for _, v := range s.Enum {
		if str, ok := v.(string); ok {
			chars, strs = chars+utf8.RuneCountInString(str), strs+1
		}
	}
	if strs > largeEnum && chars > maxLargeEnumChars {
		return fmt.Errorf("%s: %d enum values of %d characters in all; more than %d values may hold at most %d, the strict-mode limit",
			path, len(s.Enum), chars, largeEnum, maxLargeEnumChars)
	}
	if str, ok := s.Const.(string); ok {
		chars += utf8.RuneCountInString(str)
	}
	return n.addChars(chars, path)
}

// addChars counts characters of names, enum and const values.
func (n *size) addChars(c int, path string) error {
	n.chars += c
	if n.chars > maxNameChars {
		return fmt.Errorf("%s: property names, definition names, enum and const values hold more than %d characters, the strict-mode limit",
			path, maxNameChars)
	}
	return nil
}

// nullable turns an optional property's schema into a union with null,
// keeping its description on the union.
func nullable(s *invopop.Schema) *invopop.Schema {
	if s.Type == "" && len(s.AnyOf) > 0 { // already a union: one more branch
		s.AnyOf = append(s.AnyOf, &invopop.Schema{Type: "null"})
		return s
	}
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
