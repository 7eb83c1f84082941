package toolset

import (
	"fmt"
	"reflect"
	"strings"
)

// SecretTag is the struct tag that marks a field of a tool's input or
// output struct as a secret: `toolguard:"secret"`, beside its json and
// jsonschema tags. Output secrets never reach the model, the store or a
// log (each is replaced by guard.SecretPlaceholder); input secrets are
// audited as keyed hashes only, and no inbox page shows them (see
// guard.ToolSpec.SecretOutput and SecretArguments).
const SecretTag = "toolguard"

// secretPaths lists the members of t's JSON form that are marked secret,
// as guard.ToolSpec paths: "name", "name.member", "name[].member". It
// follows structs, pointers, slices and arrays, and embedded structs as
// encoding/json flattens them; a marked field of a map's values is not
// reached. A type that holds itself (a tree) has paths without end: its
// own level is listed, and recursive reports it, so that a type with
// secrets can be refused rather than withhold only some.
func secretPaths(t reflect.Type) (paths []string, recursive bool) {
	walkSecrets(t, "", map[reflect.Type]bool{}, &paths, &recursive)
	return paths, recursive
}

func walkSecrets(t reflect.Type, prefix string, seen map[reflect.Type]bool, out *[]string, recursive *bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	if seen[t] {
		*recursive = true
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, skip := jsonName(f)
		if skip {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			walkSecrets(ft, prefix, seen, out, recursive) // its fields are the outer object's
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		if hasSecretTag(f) {
			*out = append(*out, path)
			continue
		}
		switch ft.Kind() {
		case reflect.Struct:
			walkSecrets(ft, path+".", seen, out, recursive)
		case reflect.Slice, reflect.Array:
			walkSecrets(ft.Elem(), path+"[].", seen, out, recursive)
		}
	}
}

// jsonName is a field's name in encoding/json's form ("" for its Go
// name), and whether encoding/json skips it.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	name, _, _ := strings.Cut(tag, ",")
	return name, false
}

func hasSecretTag(f reflect.StructField) bool {
	for _, v := range strings.Split(f.Tag.Get(SecretTag), ",") {
		if strings.TrimSpace(v) == "secret" {
			return true
		}
	}
	return false
}

// mustSecretPaths is secretPaths for a tool's declaration: it panics, like
// the schema's errors, for a recursive type that declares secrets, whose
// deeper levels could not be withheld.
func mustSecretPaths(tool string, t reflect.Type) []string {
	paths, recursive := secretPaths(t)
	if recursive && len(paths) > 0 {
		panic(fmt.Sprintf("toolset: tool %q: %s holds itself and declares secrets: the secrets of its deeper levels could not be withheld; flatten it", tool, t))
	}
	return paths
}
