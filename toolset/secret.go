package toolset

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolguard/toolguard/guard"
)

// SecretTag is the struct tag that marks a field of a tool's input or
// output struct as a secret: `toolguard:"secret"`, beside its json and
// jsonschema tags. Output secrets never reach the model, the store or a
// log (each is replaced by guard.SecretPlaceholder); input secrets are
// audited as keyed hashes only, and no inbox page shows them (see
// guard.ToolSpec.SecretOutput and SecretArguments).
//
// A marked field is withheld wherever it sits in the value at run time,
// as encoding/json writes it: through structs, pointers, slices, arrays,
// map values, embedded structs, a JSONText's text and interface values
// (an `any` field holding a struct with a marked field). The places the
// type fixes are declared once, as guard paths (ToolSpec.SecretOutput);
// the places only the value knows (inside an interface value, or deeper
// than a type that holds itself) are found in each output by walking it,
// and handed to the guard with guard.Invocation.WithholdOutput. A type
// that implements json.Marshaler or encoding.TextMarshaler (JSONText
// aside) writes what it likes: its fields are not looked into, so mark
// the field that holds it.
const SecretTag = "toolguard"

// secrets is what toolset knows of the secrets of a tool's input or
// output type.
type secrets struct {
	paths []string // guard paths of the places the type fixes
	// walk says that some values of the type hold secrets the paths do
	// not reach (an interface, a type that holds itself): each value is
	// walked (runtime).
	walk bool
}

// secretsOf lists the secrets of t's JSON form.
func secretsOf(t reflect.Type) secrets {
	var s secrets
	recursive := false
	walkSecrets(t, "", map[reflect.Type]bool{}, &s, &recursive)
	if recursive && len(s.paths) > 0 {
		s.walk = true
	}
	return s
}

// secretPaths lists the guard paths of the fields of t marked secret, and
// whether t holds itself.
func secretPaths(t reflect.Type) (paths []string, recursive bool) {
	var s secrets
	walkSecrets(t, "", map[reflect.Type]bool{}, &s, &recursive)
	return s.paths, recursive
}

// join appends a member name to a path.
func join(prefix, name string) string {
	if prefix == "" {
		return guard.SecretMember(name)
	}
	return prefix + "." + guard.SecretMember(name)
}

func walkSecrets(t reflect.Type, prefix string, seen map[reflect.Type]bool, s *secrets, recursive *bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if inner, ok := textOf(t); ok {
		walkSecrets(inner, prefix+"#", seen, s, recursive)
		return
	}
	if opaque(t) {
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		s.walk = true
		return
	case reflect.Map:
		walkSecrets(t.Elem(), prefix+"{}", seen, s, recursive)
		return
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 || t.Kind() == reflect.Array {
			walkSecrets(t.Elem(), prefix+"[]", seen, s, recursive)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	if seen[t] {
		*recursive = true
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for _, f := range fieldsOf(t) {
		path := join(prefix, f.name)
		if f.secret {
			s.paths = append(s.paths, path)
			continue
		}
		walkSecrets(f.typ, path, seen, s, recursive)
	}
}

// field is one member encoding/json writes of a struct.
type field struct {
	name   string
	index  []int
	typ    reflect.Type
	secret bool
}

var fieldCache sync.Map // reflect.Type → []field

// fieldsOf returns t's members as encoding/json writes them, in field
// order.
func fieldsOf(t reflect.Type) []field {
	if c, ok := fieldCache.Load(t); ok {
		return c.([]field)
	}
	var out []field
	for name, f := range jsonFields(t, "") {
		out = append(out, field{name: name, index: f.field.Index, typ: f.field.Type, secret: hasSecretTag(f.field)})
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	fieldCache.Store(t, out)
	return out
}

func hasSecretTag(f reflect.StructField) bool {
	for _, v := range strings.Split(f.Tag.Get(SecretTag), ",") {
		if strings.TrimSpace(v) == "secret" {
			return true
		}
	}
	return false
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// opaque reports whether encoding/json leaves t's JSON to t itself. A
// type whose pointer has the method is not: encoding/json calls it only
// for an addressable value, and otherwise writes the fields, which are
// then withheld where they would stand.
func opaque(t reflect.Type) bool {
	return t.Kind() != reflect.Interface && (t.Implements(marshalerType) || t.Implements(textMarshalerType))
}

// textOf returns T when t is a JSONText[T].
func textOf(t reflect.Type) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct || !t.Implements(jsonTexterType) {
		return nil, false
	}
	return reflect.Zero(t).Interface().(jsonTexter).jsonTextOf(), true
}

var holdsCache sync.Map // reflect.Type → bool

// holds reports whether a value of t can hold a secret: a marked field,
// or an interface, anywhere in it.
func holds(t reflect.Type) bool {
	if c, ok := holdsCache.Load(t); ok {
		return c.(bool)
	}
	h := holds1(t, map[reflect.Type]bool{})
	holdsCache.Store(t, h)
	return h
}

func holds1(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if inner, ok := textOf(t); ok {
		return holds1(inner, seen)
	}
	if opaque(t) || seen[t] {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Map, reflect.Slice, reflect.Array:
		return holds1(t.Elem(), seen)
	case reflect.Struct:
		seen[t] = true
		for _, f := range fieldsOf(t) {
			if f.secret || holds1(f.typ, seen) {
				return true
			}
		}
	}
	return false
}

// runtimeSecrets appends to out the guard paths of the marked fields in
// v, a value encoding/json wrote without error, where they stand in this
// value (a map's keys, a slice's indexes, an interface's dynamic type).
func runtimeSecrets(v reflect.Value, prefix string, out []string) []string {
	if !v.IsValid() {
		return out // a nil interface
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return out
		}
		v = v.Elem()
	}
	t := v.Type()
	if _, ok := textOf(t); ok {
		return runtimeSecrets(v.Field(0), prefix+"#", out)
	}
	if !holds(t) {
		return out
	}
	switch t.Kind() {
	case reflect.Struct:
		for _, f := range fieldsOf(t) {
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil {
				continue // behind a nil embedded pointer: not written
			}
			if f.secret {
				out = append(out, join(prefix, f.name))
				continue
			}
			out = runtimeSecrets(fv, join(prefix, f.name), out)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			name, ok := mapKey(it.Key())
			if !ok {
				// A key we cannot name: withhold the map's every member.
				out = append(out, prefix+"{}")
				continue
			}
			out = runtimeSecrets(it.Value(), join(prefix, name), out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = runtimeSecrets(v.Index(i), prefix+"["+strconv.Itoa(i)+"]", out)
		}
	}
	return out
}

// mapKey is a map key as encoding/json writes it.
func mapKey(k reflect.Value) (string, bool) {
	if k.Kind() == reflect.String {
		return k.String(), k.String() != ""
	}
	if k.CanInterface() {
		if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
			b, err := tm.MarshalText()
			return string(b), err == nil && len(b) > 0
		}
	} else if k.Type().Implements(textMarshalerType) {
		return "", false
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), true
	}
	return "", false
}

// mustSecretPaths is secretPaths for a tool's input: it panics, like the
// schema's errors, for a type that holds itself and declares secrets,
// whose deeper levels could not be withheld from the audit record.
func mustSecretPaths(tool string, t reflect.Type) []string {
	paths, recursive := secretPaths(t)
	if recursive && len(paths) > 0 {
		panic(fmt.Sprintf("toolset: tool %q: %s holds itself and declares secrets: the secrets of its deeper levels could not be withheld; flatten it", tool, t))
	}
	return paths
}
