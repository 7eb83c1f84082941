package canon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolguard/toolguard/internal/canon"
)

// FuzzParse: Parse never panics; what it accepts encoding/json accepts too,
// the canonical output is valid JSON, reads to the same value and is a
// fixed point; what it rejects is explained by a *canon.Error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x"]}`,
		`{"amount":12.50,"currency":"EUR","order_id":"A-1001","note":"caf\u00e9 \ud83d\ude00"}`,
		`[1.0,1e2,-0,-0.0,1.5e-7,1e21,123456789012345678901234567890,0.1]`,
		`"\u0000\u001f\n\/\\\""`,
	} {
		f.Add([]byte(s))
	}
	lim := canon.Limits{MaxDepth: 32, MaxBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, v, err := canon.Parse(data, lim)
		if err != nil {
			if c != nil || v != nil {
				t.Fatalf("output with error %v", err)
			}
			if _, ok := err.(*canon.Error); !ok {
				t.Fatalf("error %T is not *canon.Error", err)
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatalf("accepted invalid UTF-8 %q", data)
		}
		if !json.Valid(data) {
			t.Fatalf("accepted %q, which encoding/json rejects", data)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical %q of %q is not valid JSON", c, data)
		}
		if !utf8.Valid(c) {
			t.Fatalf("canonical %q is not valid UTF-8", c)
		}
		if !inStringsOnly(c) {
			t.Fatalf("canonical %q has white space outside strings", c)
		}
		c2, v2, err := canon.Parse(c, lim)
		if err != nil {
			t.Fatalf("canonical %q of %q rejected: %v", c, data, err)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %q -> %q -> %q", data, c, c2)
		}
		// The trees agree with each other and, by value, with
		// encoding/json's reading of the input.
		if !jsonEqualTrees(v, v2) {
			t.Fatalf("trees differ: %#v vs %#v", v, v2)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var std any
		if err := d.Decode(&std); err != nil {
			t.Fatalf("encoding/json rejects accepted %q: %v", data, err)
		}
		// Every number keeps its exact value and is in canonical form.
		if why := sameNumbers(std, v); why != "" {
			t.Fatalf("%q -> %q: %s", data, c, why)
		}
		if a, b := normalize(std), normalize(deepCopy(v)); !jsonEqualTrees(a, b) {
			t.Fatalf("value of %q: encoding/json %#v, canon %#v", data, a, b)
		}
	})
}

// sameNumbers walks encoding/json's tree of the input (json.Number holding
// the input's text) and canon's tree side by side.
func sameNumbers(std, v any) string {
	switch a := std.(type) {
	case json.Number:
		b, ok := v.(json.Number)
		if !ok {
			return fmt.Sprintf("number %s became %T", a, v)
		}
		if why := numberFormError(string(b)); why != "" {
			return fmt.Sprintf("number %s -> %s: %s", a, b, why)
		}
		if x, y := exactValue(string(a)), exactValue(string(b)); x != nil && y != nil && x.Cmp(y) != 0 {
			return fmt.Sprintf("number %s -> %s changes the value", a, b)
		}
	case []any:
		b, _ := v.([]any)
		if len(a) != len(b) {
			return "array length changed"
		}
		for i := range a {
			if why := sameNumbers(a[i], b[i]); why != "" {
				return why
			}
		}
	case map[string]any:
		b, _ := v.(map[string]any)
		if len(a) != len(b) {
			return "member count changed"
		}
		for k := range a {
			if why := sameNumbers(a[k], b[k]); why != "" {
				return why
			}
		}
	}
	return ""
}

func jsonEqualTrees(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		// ±Inf from huge integer literals: compare structurally.
		return deepEqualInf(a, b)
	}
	return bytes.Equal(ja, jb)
}

func deepEqualInf(a, b any) bool {
	switch a := a.(type) {
	case []any:
		bb, ok := b.([]any)
		if !ok || len(a) != len(bb) {
			return false
		}
		for i := range a {
			if !deepEqualInf(a[i], bb[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bb, ok := b.(map[string]any)
		if !ok || len(a) != len(bb) {
			return false
		}
		for k := range a {
			if _, ok := bb[k]; !ok || !deepEqualInf(a[k], bb[k]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = deepCopy(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}

// inStringsOnly reports whether every white-space byte of canonical JSON c
// is inside a string literal.
func inStringsOnly(c []byte) bool {
	in, esc := false, false
	for _, b := range c {
		switch {
		case esc:
			esc = false
		case in && b == '\\':
			esc = true
		case b == '"':
			in = !in
		case !in && strings.IndexByte(" \t\r\n", b) >= 0:
			return false
		}
	}
	return true
}

// A typical tool-argument object: a few strings, a number with a fraction,
// a nested object and a short array, with white space and unsorted names.
var benchArgs = []byte(`{
  "order_id": "ORD-2024-000123",
  "amount": 49.90,
  "currency": "EUR",
  "reason": "Item arrived damaged \u2014 customer sent photos",
  "items": [{"sku": "SKU-1", "qty": 2}, {"sku": "SKU-7", "qty": 1}],
  "notify": true,
  "metadata": {"channel": "chat", "priority": null}
}`)

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		if _, _, err := canon.Parse(benchArgs, canon.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
