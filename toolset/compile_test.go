package toolset_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/toolset"
)

// parse decodes JSON text as the guard does for Validate (numbers as
// json.Number).
func parse(t *testing.T, text string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCompileSchemaValidatesAnySchema(t *testing.T) {
	// An open object with an optional member: outside the strict subset.
	raw := []byte(`{"type":"object","properties":{"q":{"type":"string","minLength":2},"limit":{"type":"integer","default":10}},"required":["q"]}`)
	s, err := toolset.CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	if s.Strict() {
		t.Error("a compiled schema reports Strict")
	}
	if !bytes.Equal(s.JSON(), raw) {
		t.Errorf("JSON %s, want %s", s.JSON(), raw)
	}
	raw[0] = ' ' // the schema keeps its own copy
	if s.JSON()[0] != '{' {
		t.Error("the schema shares the caller's bytes")
	}
	for text, ok := range map[string]bool{
		`{"q":"ab"}`:              true,
		`{"q":"ab","limit":3}`:    true,
		`{"q":"ab","extra":true}`: true, // open object
		`{}`:                      false,
		`{"q":"a"}`:               false, // minLength
		`{"q":"ab","limit":"3"}`:  false,
		`{"q":"ab","limit":null}`: false, // not nullable
		`{"q":"ab","limit":1.5}`:  false,
	} {
		if err := s.Validate(parse(t, text)); (err == nil) != ok {
			t.Errorf("Validate(%s) = %v, want ok %t", text, err, ok)
		}
	}
}

func TestCompileSchemaDraft(t *testing.T) {
	// prefixItems is a 2020-12 keyword: the default draft applies it, and
	// draft-07 ignores it.
	def, err := toolset.CompileSchema([]byte(`{"type":"array","prefixItems":[{"type":"string"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if def.Validate(parse(t, `[1]`)) == nil {
		t.Error("2020-12 is not the default draft: prefixItems ignored")
	}
	d7, err := toolset.CompileSchema([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","prefixItems":[{"type":"string"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d7.Validate(parse(t, `[1]`)); err != nil {
		t.Errorf("the named draft-07 is not used: %v", err)
	}
}

func TestCompileSchemaRejects(t *testing.T) {
	for _, raw := range []string{``, `{"type":`, `{"type":5}`, `{"$ref":"#/$defs/missing"}`} {
		if s, err := toolset.CompileSchema([]byte(raw)); err == nil {
			t.Errorf("CompileSchema(%q) = %v, want an error", raw, s)
		}
	}
}

func TestSchemaForIsStrict(t *testing.T) {
	s, err := toolset.SchemaFor[struct {
		A string `json:"a,omitempty"`
	}]()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Strict() {
		t.Error("a derived schema is not Strict")
	}
}
