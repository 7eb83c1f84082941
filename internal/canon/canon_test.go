package canon_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/canon"
)

func mustParse(t *testing.T, in string) (string, any) {
	t.Helper()
	c, v, err := canon.Parse([]byte(in), canon.Limits{})
	if err != nil {
		t.Fatalf("Parse(%q): unexpected error %v", in, err)
	}
	return string(c), v
}

func TestParseCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Structure and ordering.
		{"key reordering", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"keys sort by bytes not length", `{"aa":1,"b":2,"a":3}`, `{"a":3,"aa":1,"b":2}`},
		{"uppercase before lowercase", `{"a":1,"B":2,"_":3}`, `{"B":2,"_":3,"a":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":{"b":true,"a":false}},"a":[{"d":null,"c":"s"}]}`,
			`{"a":[{"c":"s","d":null}],"z":{"x":{"a":false,"b":true},"y":1}}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"empty containers", `{"a":{},"b":[],"c":[{}, []]}`, `{"a":{},"b":[],"c":[{},[]]}`},
		{"whitespace removed", " \t\r\n{ \"b\" :\n[ 1 , 2 ] ,\t\"a\" : { } } \n", `{"a":{},"b":[1,2]}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"scalar root string", `"x"`, `"x"`},
		{"scalar root number", ` 7 `, `7`},
		{"scalar root null", `null`, `null`},
		{"escaped key sorts by its value", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},

		// Strings.
		{"unicode escape to literal", `"caf\u00e9"`, "\"caf\u00e9\""},
		{"upper-case hex escape", `"\u00C9"`, "\"\u00c9\""},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"control char lowercase hex", `"\u001F"`, `"\u001f"`},
		{"control char 01", `"\u0001"`, `"\u0001"`},
		{"nul", `"\u0000"`, `"\u0000"`},
		{"newline stays short", `"\n"`, `"\n"`},
		{"newline from u-escape", `"\u000a"`, `"\n"`},
		{"short escapes", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"short escapes from u-escapes", `"\u0008\u000c\u000d\u0009"`, `"\b\f\r\t"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"quote from u-escape", `"\u0022\u005c"`, `"\"\\"`},
		{"DEL is not escaped", `"\u007f"`, "\"\x7f\""},
		{"literal non-ASCII kept", "\"\u20ac\u00e9\"", "\"\u20ac\u00e9\""},
		{"U+2028 not escaped", `"\u2028"`, "\"\u2028\""},
		{"surrogate pair", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"surrogate pair upper hex", `"\uD834\uDD1E"`, "\"\U0001D11E\""},
		{"literal astral kept", "\"\U0001F600\"", "\"\U0001F600\""},
		{"escape after raw text", `"ab\tc"`, `"ab\tc"`},
		{"html chars not escaped", `"<&>"`, `"<&>"`},

		// Numbers.
		{"integer", `42`, `42`},
		{"negative integer", `-42`, `-42`},
		{"zero", `0`, `0`},
		{"1.0", `1.0`, `1`},
		{"1e2", `1e2`, `100`},
		{"1E2", `1E2`, `100`},
		{"1e+2", `1e+2`, `100`},
		{"-0", `-0`, `0`},
		{"-0.0", `-0.0`, `0`},
		{"-0e5", `-0e5`, `0`},
		{"0.0", `0.0`, `0`},
		{"1.5e-7", `1.5e-7`, `1.5e-7`},
		{"0.00000015", `0.00000015`, `1.5e-7`},
		{"1e-6", `1e-6`, `0.000001`},
		{"1e-7", `1e-7`, `1e-7`},
		{"1e21", `1e21`, `1e+21`},
		{"1e20", `1e20`, `100000000000000000000`},
		{"big integer kept exactly (exponent form past 1e21)", `123456789012345678901234567890`, `1.2345678901234567890123456789e+29`},
		{"negative big integer kept exactly", `-123456789012345678901234567890`, `-1.2345678901234567890123456789e+29`},
		{"integer just under 1e21 stays plain", `999999999999999999999`, `999999999999999999999`},
		{"integer 1e21 written out", `1000000000000000000000`, `1e+21`},
		{"integer with trailing zeros past 1e21", `1200000000000000000000000`, `1.2e+24`},
		{"2^53+1 kept (no float rounding)", `9007199254740993`, `9007199254740993`},
		{"2^53+1 with a fraction kept", `9007199254740993.0`, `9007199254740993`},
		{"17 significant digits kept", `0.30000000000000001`, `0.30000000000000001`},
		{"0.1", `0.1`, `0.1`},
		{"-0.1", `-0.1`, `-0.1`},
		{"0.1+0.2 shortest", `0.30000000000000004`, `0.30000000000000004`},
		{"long fraction kept exactly", `0.1000000000000000055511151231257827`, `0.1000000000000000055511151231257827`},
		{"1.0e21", `1.0e21`, `1e+21`},
		{"10e20", `10e20`, `1e+21`},
		{"0.1e22", `0.1e22`, `1e+21`},
		{"120e-1", `120e-1`, `12`},
		{"0.00 with exponent", `-0.000e5`, `0`},
		{"zero with big exponent", `0e300000`, `0`},
		{"trailing fraction zeros", `1.2500`, `1.25`},
		{"leading fraction zeros", `0.000001250`, `0.00000125`},
		{"7 leading zeros goes exponent", `0.000000125`, `1.25e-7`},
		{"just under max float", `1.7976931348623158e308`, `1.7976931348623158e+308`},
		{"4.50", `4.50`, `4.5`},
		{"2e-3", `2e-3`, `0.002`},
		{"1E30", `1E30`, `1e+30`},
		{"1e23", `1e23`, `1e+23`},
		{"5e-324", `5e-324`, `5e-324`},
		{"-5e-324", `-5e-324`, `-5e-324`},
		{"tiny value kept exactly, not rounded to 0", `1e-400`, `1e-400`},
		{"tiny value with digits", `-1.50e-400`, `-1.5e-400`},
		{"max float", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"exponent with fraction", `12.5e1`, `125`},
		{"1.5e300", `1.5e300`, `1.5e+300`},

		// RFC 8785 section 3.2.2 example. RFC 8785 writes the first number
		// as 333333333.3333333 (the float64's shortest form); canon keeps
		// all 17 written digits (documented deviation: exact decimal value).
		{"rfc8785 example",
			"{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n" +
				"  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n" +
				"  \"literals\": [null, true, false]\n}",
			`{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := mustParse(t, tt.in)
			if got != tt.want {
				t.Errorf("Parse(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			// Every expected output is itself valid JSON that encoding/json
			// reads to the same value as the input (guards the table).
			if !json.Valid([]byte(tt.want)) {
				t.Errorf("expected output %q is not valid JSON", tt.want)
			}
		})
	}
}

// The documented deviation from RFC 8785: names sort by UTF-8 bytes (code
// points), not UTF-16 code units. U+1F600 is D83D DE00 in UTF-16 (before
// U+FB33) but F0 9F 98 80 in UTF-8 (after EF AC B3).
func TestParseSortsByCodePoint(t *testing.T) {
	got, _ := mustParse(t, `{"\ud83d\ude00":1,"\ufb33":2,"\u00e9":3,"z":4}`)
	want := "{\"z\":4,\"\u00e9\":3,\"\ufb33\":2,\"\U0001F600\":1}"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// RFC 8785 Appendix B / section 3.2.2.3 number samples, given by their IEEE
// 754 bit patterns.
var rfc8785Numbers = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
}

func TestFormatFloatRFC8785(t *testing.T) {
	for _, tt := range rfc8785Numbers {
		f := math.Float64frombits(tt.bits)
		if got := canon.FormatFloat(f); got != tt.want {
			t.Errorf("FormatFloat(%#016x = %v) = %s, want %s", tt.bits, f, got, tt.want)
		}
	}
}

// The same samples written as JSON text, in their shortest round-trip
// digits plus a ".0" or exponent, parse to the RFC's text: written with the
// float64's own shortest digits, the exact decimal value canon keeps is the
// float64's value, so canon and RFC 8785 agree. The integer samples
// written as integers give the same text too.
func TestParseRFC8785Numbers(t *testing.T) {
	for _, tt := range rfc8785Numbers {
		f := math.Float64frombits(tt.bits)
		in := formatE(f)
		got, _ := mustParse(t, in)
		if got != tt.want {
			t.Errorf("Parse(%s) = %s, want %s", in, got, tt.want)
		}
		if !strings.ContainsAny(tt.want, ".e") {
			if got, _ := mustParse(t, tt.want); got != tt.want {
				t.Errorf("Parse(integer %s) = %s", tt.want, got)
			}
		}
	}
}

func formatE(f float64) string {
	b, _ := json.Marshal(f) // shortest round-trip, JSON syntax
	s := string(b)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ``},
		{"only space", "  \n"},
		{"trailing comma object", `{"a":1,}`},
		{"trailing comma array", `[1,]`},
		{"leading comma array", `[,1]`},
		{"missing value", `{"a":}`},
		{"missing colon", `{"a" 1}`},
		{"unquoted key", `{a:1}`},
		{"single quotes", `{'a':1}`},
		{"unclosed object", `{"a":1`},
		{"unclosed array", `[1,2`},
		{"unclosed string", `"abc`},
		{"trailing data", `{} {}`},
		{"trailing garbage", `1 x`},
		{"two values", `1 2`},
		{"duplicate key", `{"a":1,"a":2}`},
		{"duplicate key nested", `{"x":{"a":1,"b":2,"a":3}}`},
		{"duplicate key in array", `[{"a":1},{"b":1,"b":1}]`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`},
		{"duplicate empty key", `{"":1,"":2}`},
		{"invalid UTF-8 in string", "\"\xff\""},
		{"invalid UTF-8 after escape", "\"\\n\xc3\""},
		{"invalid UTF-8 in key", "{\"\xc3\x28\":1}"},
		{"overlong UTF-8", "\"\xc0\xaf\""},
		{"UTF-8 surrogate bytes", "\"\xed\xa0\x80\""},
		{"lone high surrogate", `"\ud800"`},
		{"lone high surrogate then text", `"\ud800abcdef"`},
		{"lone low surrogate", `"\udc00"`},
		{"high then non-low", `"\ud800\u0041"`},
		{"high then high", `"\ud800\ud800"`},
		{"high then short escape", `"\ud800\n"`},
		{"short u escape", `"\u12"`},
		{"bad hex", `"\u12g4"`},
		{"invalid escape", `"\x41"`},
		{"escape at end", `"\`},
		{"raw control char", "\"a\x01b\""},
		{"raw newline", "\"a\nb\""},
		{"raw tab", "\"a\tb\""},
		{"raw unit separator 0x1f", "\"a\x1fb\""},
		{"raw control char in key", "{\"\x1f\":1}"},
		{"raw control char after escape", "\"\\n\x1f\""},
		{"1E400 out of range", `1E400`},
		{"-1e400 out of range", `-1e400`},
		{"just over max float", `1.7976931348623159e308`},
		{"huge integer", "1" + strings.Repeat("0", 309)},
		{"huge exponent", `1e99999999999999999999`},
		{"leading zero", `01`},
		{"negative leading zero", `-01`},
		{"leading zero with fraction", `00.5`},
		{"plus sign", `+1`},
		{"bare minus", `-`},
		{"minus space", `- 1`},
		{"dot without digits", `1.`},
		{"dot first", `.5`},
		{"exponent without digits", `1e`},
		{"exponent sign only", `1e+`},
		{"hex number", `0x10`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"truncated true", `tru`},
		{"misspelled false", `fals3`},
		{"True capitalized", `True`},
		{"nul byte", "\x00"},
		{"BOM", "\xef\xbb\xbf{}"},
		{"comment", `{} // x`},
		{"vertical tab space", "\v{}"},
		{"NBSP space", "\u00a0{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, v, err := canon.Parse([]byte(tt.in), canon.Limits{})
			if err == nil {
				t.Fatalf("Parse(%q) = %s, %v; want error", tt.in, c, v)
			}
			var ce *canon.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *canon.Error", err)
			}
			if ce.Offset < 0 || ce.Offset > len(tt.in) {
				t.Errorf("offset %d outside input of %d bytes", ce.Offset, len(tt.in))
			}
			if c != nil || v != nil {
				t.Errorf("got output %q, %v with error", c, v)
			}
			if canon.IsTooLarge(err) {
				t.Errorf("IsTooLarge(%v) = true", err)
			}
		})
	}
}

// The error text names the problem and offset but never echoes the input.
func TestErrorDoesNotEchoInput(t *testing.T) {
	secret := "sk-SECRET-0123456789"
	inputs := []string{
		`{"` + secret + `":1,"` + secret + `":2}`,
		`{"a":"` + secret + "\x01\"}",
		`{"a":"` + secret + `\q"}`,
		`{"a":` + secret + `}`,
		`["` + secret + "\xff\"]",
	}
	for _, in := range inputs {
		_, _, err := canon.Parse([]byte(in), canon.Limits{})
		if err == nil {
			t.Fatalf("Parse(%q) accepted", in)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %q echoes the input", err)
		}
		if !strings.HasPrefix(err.Error(), "invalid JSON at byte ") {
			t.Errorf("error %q has unexpected form", err)
		}
	}
}

func TestErrorOffsets(t *testing.T) {
	tests := []struct {
		in     string
		offset int
	}{
		{`{"a":1,"a":2}`, 10},  // after the duplicate name
		{`[1,2] x`, 6},         // trailing data
		{`01`, 0},              // leading zero at the digits
		{`[-01]`, 2},           // leading zero after the sign
		{`{"a":1e400}`, 5},     // number start
		{"[\"ab\xff\"]", 2},    // string content start
		{`[1,]`, 3},            // where a value was expected
		{`"\ud800x"`, 7},       // after the lone surrogate
		{`"\udc00\u0041"`, 7},  // a low surrogate cannot start a pair
		{`"\ud800\u0041"`, 13}, // a high surrogate needs a low one
	}
	for _, tt := range tests {
		_, _, err := canon.Parse([]byte(tt.in), canon.Limits{})
		var ce *canon.Error
		if !errors.As(err, &ce) {
			t.Errorf("Parse(%q): error %v", tt.in, err)
			continue
		}
		if ce.Offset != tt.offset {
			t.Errorf("Parse(%q): offset %d (%s), want %d", tt.in, ce.Offset, ce.Reason, tt.offset)
		}
		if strings.Contains(tt.in, `\u`) && !strings.Contains(ce.Reason, "surrogate") {
			t.Errorf("Parse(%q): reason %q does not name the surrogate", tt.in, ce.Reason)
		}
	}
}

func nest(depth int, open, close, leaf string) string {
	return strings.Repeat(open, depth) + leaf + strings.Repeat(close, depth)
}

func TestDepthLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 2, 5, canon.DefaultMaxDepth} {
		eff := limit
		if eff == 0 {
			eff = canon.DefaultMaxDepth
		}
		lim := canon.Limits{MaxDepth: limit}
		shapes := []struct {
			name string
			doc  func(d int) string
		}{
			{"arrays", func(d int) string { return nest(d, "[", "]", "1") }},
			{"objects", func(d int) string { return nest(d, `{"a":`, "}", "1") }},
			{"mixed", func(d int) string {
				var b strings.Builder
				for i := range d {
					if i%2 == 0 {
						b.WriteString(`[`)
					} else {
						b.WriteString(`{"k":`)
					}
				}
				b.WriteString("null")
				for i := d - 1; i >= 0; i-- {
					if i%2 == 0 {
						b.WriteString(`]`)
					} else {
						b.WriteString(`}`)
					}
				}
				return b.String()
			}},
			{"empty innermost", func(d int) string { return nest(d-1, "[", "]", "{}") }},
		}
		for _, sh := range shapes {
			at := sh.doc(eff)
			c, _, err := canon.Parse([]byte(at), lim)
			if err != nil {
				t.Errorf("limit %d %s: depth exactly at the limit rejected: %v", limit, sh.name, err)
			} else if string(c) != at {
				t.Errorf("limit %d %s: canonical %s, want %s", limit, sh.name, c, at)
			}
			over := sh.doc(eff + 1)
			if _, _, err := canon.Parse([]byte(over), lim); err == nil {
				t.Errorf("limit %d %s: depth %d over the limit accepted", limit, sh.name, eff+1)
			} else if !strings.Contains(err.Error(), "nesting deeper than") {
				t.Errorf("limit %d %s: unexpected error %v", limit, sh.name, err)
			}
		}
	}
	// Siblings do not add up: depth is nesting, not count.
	wide := "[" + strings.Repeat("[[]],", 1000) + "[[]]]"
	if _, _, err := canon.Parse([]byte(wide), canon.Limits{MaxDepth: 3}); err != nil {
		t.Errorf("wide but shallow document rejected: %v", err)
	}
	// Scalars have no depth.
	if _, _, err := canon.Parse([]byte(`"x"`), canon.Limits{MaxDepth: 1}); err != nil {
		t.Errorf("scalar rejected: %v", err)
	}
	// Way over the limit fails fast, without a stack overflow.
	deep := nest(1_000_000, "[", "]", "")
	if _, _, err := canon.Parse([]byte(deep), canon.Limits{MaxBytes: len(deep)}); err == nil {
		t.Error("million-deep nesting accepted")
	}
}

func TestSizeLimit(t *testing.T) {
	doc := `{"a":"` + strings.Repeat("x", 100) + `"}` // 108 bytes
	n := len(doc)
	if _, _, err := canon.Parse([]byte(doc), canon.Limits{MaxBytes: n}); err != nil {
		t.Errorf("input exactly at the limit rejected: %v", err)
	}
	_, _, err := canon.Parse([]byte(doc), canon.Limits{MaxBytes: n - 1})
	if err == nil {
		t.Fatal("input one byte over the limit accepted")
	}
	if !canon.IsTooLarge(err) || !errors.Is(err, canon.ErrTooLarge) {
		t.Errorf("IsTooLarge(%v) = false, or errors.Is(err, ErrTooLarge) = false", err)
	}
	if !errors.As(err, new(*canon.Error)) {
		t.Errorf("error %T is not *canon.Error", err)
	}
	// The size check happens before parsing: even invalid input is too large.
	if _, _, err := canon.Parse([]byte("\xff\xff\xff"), canon.Limits{MaxBytes: 2}); !canon.IsTooLarge(err) {
		t.Errorf("oversized invalid input: IsTooLarge false for %v", err)
	}
	// Default limit.
	big := make([]byte, canon.DefaultMaxBytes+1)
	for i := range big {
		big[i] = ' '
	}
	big[0] = '0'
	if _, _, err := canon.Parse(big, canon.Limits{}); !canon.IsTooLarge(err) {
		t.Errorf("input over DefaultMaxBytes: %v", err)
	}
	if _, _, err := canon.Parse(big[:canon.DefaultMaxBytes], canon.Limits{}); err != nil {
		t.Errorf("input of DefaultMaxBytes rejected: %v", err)
	}
	// Other errors are not "too large".
	for _, e := range []error{nil, errors.New("input too large"), &canon.Error{Reason: "duplicate member name"}} {
		if canon.IsTooLarge(e) {
			t.Errorf("IsTooLarge(%v) = true", e)
		}
	}
}

func TestValueTree(t *testing.T) {
	_, v := mustParse(t, `{"s":"x\u00e9","i":-0,"f":1.50,"big":123456789012345678901234567890,
		"t":true,"fa":false,"n":null,"a":[1,"2",[],{}],"o":{"k":{}}}`)
	want := map[string]any{
		"s":   "xé",
		"i":   json.Number("0"),
		"f":   json.Number("1.5"),
		"big": json.Number("1.2345678901234567890123456789e+29"),
		"t":   true,
		"fa":  false,
		"n":   nil,
		"a":   []any{json.Number("1"), "2", []any{}, map[string]any{}},
		"o":   map[string]any{"k": map[string]any{}},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("value tree\n got %#v\nwant %#v", v, want)
	}
	// Types, explicitly (DeepEqual would already catch them, but be clear).
	m := v.(map[string]any)
	if _, ok := m["f"].(json.Number); !ok {
		t.Errorf("number is %T, want json.Number", m["f"])
	}
	if a, ok := m["a"].([]any); !ok || a == nil {
		t.Errorf("array is %T", m["a"])
	}
	// Empty containers are non-nil.
	if m["a"].([]any)[2].([]any) == nil || m["o"].(map[string]any)["k"].(map[string]any) == nil {
		t.Error("empty containers decoded as nil")
	}
	// Scalar roots.
	for in, want := range map[string]any{`null`: nil, `true`: true, `"s"`: "s", `1e2`: json.Number("100"), `[]`: []any{}} {
		if _, v := mustParse(t, in); !reflect.DeepEqual(v, want) {
			t.Errorf("Parse(%s) value %#v, want %#v", in, v, want)
		}
	}
}

// The json.Number in the tree is the canonical text, so it agrees with
// the canonical bytes.
func TestValueNumbersAreCanonical(t *testing.T) {
	for _, in := range []string{`1.0`, `-0`, `1E+2`, `0.000001`, `1e21`, `5.0e-324`, `123456789012345678901234567890`} {
		c, v := mustParse(t, in)
		n, ok := v.(json.Number)
		if !ok || string(n) != c {
			t.Errorf("Parse(%s): value %#v, canonical %s", in, v, c)
		}
	}
}

// Parse must not alias or modify its input.
func TestParseDoesNotModifyInput(t *testing.T) {
	in := []byte(`{"b":"\u00e9","a":[1.0,2]}`)
	orig := string(in)
	c, _, err := canon.Parse(in, canon.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != orig {
		t.Errorf("input modified to %s", in)
	}
	c[0] = 'X'
	if string(in) != orig {
		t.Error("output aliases input")
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\x00\x1f\x7f", "\"\\u0000\\u001f\x7f\""},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"é/€\U0001F600", "\"é/€\U0001F600\""},
		{"\x0b", `"\u000b"`},
	}
	for _, tt := range tests {
		got := string(canon.AppendString([]byte("pre:"), tt.in))
		if got != "pre:"+tt.want {
			t.Errorf("AppendString(%q) = %s, want pre:%s", tt.in, got, tt.want)
		}
		// It reads back to the same string with encoding/json and with Parse.
		var s string
		if err := json.Unmarshal([]byte(tt.want), &s); err != nil || s != tt.in {
			t.Errorf("%s reads back as %q, %v", tt.want, s, err)
		}
		if c, _ := mustParse(t, tt.want); c != tt.want {
			t.Errorf("AppendString(%q) is not canonical: Parse gives %s", tt.in, c)
		}
	}
	// Every control character gets the shortest escape Parse also uses.
	for c := range 0x20 {
		s := string(rune(c))
		enc := string(canon.AppendString(nil, s))
		var back string
		if err := json.Unmarshal([]byte(enc), &back); err != nil || back != s {
			t.Errorf("control %#x: %s reads back as %q, %v", c, enc, back, err)
		}
		if strings.ContainsAny(enc, "ABCDEF") {
			t.Errorf("control %#x: upper-case hex in %s", c, enc)
		}
	}
}
