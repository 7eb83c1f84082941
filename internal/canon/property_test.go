package canon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolguard/toolguard/internal/canon"
)

// FormatFloat against strconv, an independent implementation of the
// shortest round-trip digits: in the plain range (1e-6 <= |f| < 1e21) the
// ECMAScript form is strconv's 'f' form; outside it, strconv's 'e' form with
// the exponent's padding removed and its sign always written.
func TestFormatFloatAgainstStrconv(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		t.Helper()
		got := canon.FormatFloat(f)
		back, err := strconv.ParseFloat(got, 64)
		if err != nil || back != f && !(f == 0 && back == 0) {
			t.Fatalf("FormatFloat(%v) = %s does not read back (%v, %v)", f, got, back, err)
		}
		if !json.Valid([]byte(got)) {
			t.Fatalf("FormatFloat(%v) = %s is not a JSON number", f, got)
		}
		var want string
		abs := math.Abs(f)
		switch {
		case f == 0:
			want = "0"
		case abs >= 1e-6 && abs < 1e21:
			want = strconv.FormatFloat(f, 'f', -1, 64)
		default:
			want = strconv.FormatFloat(f, 'e', -1, 64)
			mant, exp, _ := strings.Cut(want, "e")
			sign := exp[0]
			exp = strings.TrimLeft(exp[1:], "0")
			want = mant + "e" + string(sign) + exp
		}
		if got != want {
			t.Fatalf("FormatFloat(%v) = %s, want %s", f, got, want)
		}
	}
	// Boundaries of the plain range and special values.
	for _, f := range []float64{
		1e-7, 1e-6, math.Nextafter(1e-6, 0), math.Nextafter(1e-6, 1),
		1e21, math.Nextafter(1e21, 0), math.Nextafter(1e21, math.Inf(1)), 1e20,
		math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1, 0.2, 0.3, 1.0 / 3,
		123456789, 1 << 53, 1<<53 + 2, 0.5, 100, 1e300, 1e-300, 2.5e-8,
		math.Copysign(0, -1),
	} {
		check(f)
		check(-f)
	}
	for range iterations(100_000) {
		var f float64
		switch r.IntN(4) {
		case 0: // any bit pattern
			f = math.Float64frombits(r.Uint64())
		case 1: // around the plain range
			f = r.Float64() * math.Pow(10, float64(r.IntN(40)-15))
		case 2: // integers
			f = float64(r.Int64N(1 << 60))
		default: // short decimals
			f, _ = strconv.ParseFloat(fmt.Sprintf("%d.%de%d", r.IntN(1000), r.IntN(1000), r.IntN(60)-30), 64)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		check(f)
	}
}

// gen builds random JSON text of values encoding/json accepts, with
// random white space, escapes and number spellings, no duplicate names and
// valid UTF-8: exactly the inputs canon must accept.
type gen struct {
	r     *rand.Rand
	b     strings.Builder
	depth int
}

func (g *gen) ws() {
	for g.r.IntN(4) == 0 {
		g.b.WriteByte(" \t\r\n"[g.r.IntN(4)])
	}
}

var runePool = []rune{'a', 'z', 'A', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f,
	'é', '€', 0x2028, 0xfffd, 0xfeff, 0x10ffff, 0x1F600, 0xfb33, 'ß', '<', '>', '&'}

func (g *gen) str() string {
	n := g.r.IntN(6)
	rs := make([]rune, n)
	for i := range rs {
		rs[i] = runePool[g.r.IntN(len(runePool))]
	}
	s := string(rs)
	g.b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			g.b.WriteString(`\` + string(c))
		case c == '/' && g.r.IntN(2) == 0:
			g.b.WriteString(`\/`)
		case c < 0x20 || g.r.IntN(4) == 0:
			// \u escape, random hex case, surrogate pair above the BMP.
			hex := "%04x"
			if g.r.IntN(2) == 0 {
				hex = "%04X"
			}
			if c > 0xffff {
				c -= 0x10000
				fmt.Fprintf(&g.b, `\u`+hex+`\u`+hex, 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else if short := map[rune]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[c]; short != "" && g.r.IntN(2) == 0 {
				g.b.WriteString(short)
			} else {
				fmt.Fprintf(&g.b, `\u`+hex, c)
			}
		default:
			g.b.WriteRune(c)
		}
	}
	g.b.WriteByte('"')
	return s
}

func (g *gen) number() {
	r := g.r
	if r.IntN(3) == 0 {
		g.b.WriteByte('-')
	}
	switch r.IntN(5) {
	case 0:
		g.b.WriteString("0")
	case 1: // long integer
		g.b.WriteByte(byte('1' + r.IntN(9)))
		for range r.IntN(30) {
			g.b.WriteByte(byte('0' + r.IntN(10)))
		}
	default:
		g.b.WriteString(strconv.Itoa(r.IntN(100000)))
	}
	if r.IntN(2) == 0 {
		g.b.WriteByte('.')
		for range 1 + r.IntN(20) {
			g.b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	if r.IntN(3) == 0 {
		g.b.WriteByte("eE"[r.IntN(2)])
		if s := r.IntN(3); s < 2 {
			g.b.WriteByte("+-"[s])
		}
		g.b.WriteString(strconv.Itoa(r.IntN(330)))
	}
}

func (g *gen) value() {
	g.ws()
	k := g.r.IntN(9)
	if g.depth >= 6 && k >= 7 {
		k = g.r.IntN(7)
	}
	switch k {
	case 0:
		g.b.WriteString([]string{"true", "false", "null"}[g.r.IntN(3)])
	case 1, 2:
		g.str()
	case 3, 4, 5, 6:
		g.number()
	case 7:
		g.depth++
		g.b.WriteByte('[')
		n := g.r.IntN(5)
		for i := range n {
			if i > 0 {
				g.ws()
				g.b.WriteByte(',')
			}
			g.value()
		}
		g.ws()
		g.b.WriteByte(']')
		g.depth--
	case 8:
		g.depth++
		g.b.WriteByte('{')
		seen := map[string]bool{}
		n := g.r.IntN(5)
		for i := range n {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			// Rebuild until the name is new.
			for {
				mark := g.b.Len()
				name := g.str()
				if !seen[name] {
					seen[name] = true
					break
				}
				s := g.b.String()[:mark]
				g.b.Reset()
				g.b.WriteString(s)
			}
			g.ws()
			g.b.WriteByte(':')
			g.value()
			g.ws()
		}
		g.b.WriteByte('}')
		g.depth--
	}
	g.ws()
}

// normalize turns a tree decoded by encoding/json with UseNumber into one
// that compares by value: every number becomes its float64 (so 1.0 equals
// 1 and -0 equals 0; integers beyond float64 range become ±Inf on both
// sides alike). Exactness of long integers is checked byte for byte by
// canonicalViaStdlib instead.
func normalize(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && !math.IsInf(f, 0) {
			panic(err)
		}
		return f + 0 // -0 -> 0
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalize(v[k])
		}
	}
	return v
}

func decodeStd(t *testing.T, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", data, err)
	}
	return normalize(v)
}

var (
	plainNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)
	expNumber   = regexp.MustCompile(`^-?[1-9](\.[0-9]*[1-9])?e([+-][1-9][0-9]*)$`)
)

// numberFormError says why s is not a number in canonical form: shortest
// digits (no leading or trailing zeros), no "-0", and ECMAScript's choice
// of notation: plain from 1e-6 up to 1e21 (exclusive), exponent outside.
// Together with the exact value this fixes the text uniquely.
func numberFormError(s string) string {
	if s == "-0" {
		return "negative zero"
	}
	if m := expNumber.FindStringSubmatch(s); m != nil {
		x, err := strconv.Atoi(m[2])
		if err != nil {
			return "bad exponent"
		}
		if x > -7 && x < 21 {
			return "exponent notation inside the plain range"
		}
		return ""
	}
	if !plainNumber.MatchString(s) {
		return "not a shortest plain or exponent form"
	}
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if len(intPart) > 21 {
		return "plain notation at or above 1e21"
	}
	if intPart == "0" && frac != "" && len(frac)-len(strings.TrimLeft(frac, "0")) > 5 {
		return "plain notation below 1e-6"
	}
	return ""
}

// exactValue returns the exact rational value of JSON number text, or nil
// when the exponent is too large to compute cheaply.
func exactValue(s string) *big.Rat {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		x, err := strconv.Atoi(s[i+1:])
		if err != nil || x > 2000 || x < -2000 {
			return nil
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("bad number " + s)
	}
	return r
}

// checkCanonicalShape checks the canonical text's form without a second
// canonicalizer: no insignificant space, sorted unique names, numbers in
// ECMAScript form, strings with only the mandatory escapes.
func checkCanonicalShape(t *testing.T, c []byte) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(c))
	d.UseNumber()
	var reenc bytes.Buffer
	var walk func() error
	walk = func() error {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case json.Delim:
			reenc.WriteString(tok.String())
			if tok == '{' {
				prev := ""
				first := true
				for d.More() {
					kt, err := d.Token()
					if err != nil {
						return err
					}
					k := kt.(string)
					if !first && k <= prev {
						return fmt.Errorf("names not sorted: %q after %q", k, prev)
					}
					if !first {
						reenc.WriteByte(',')
					}
					first, prev = false, k
					reenc.Write(canon.AppendString(nil, k))
					reenc.WriteByte(':')
					if err := walk(); err != nil {
						return err
					}
				}
				end, _ := d.Token()
				reenc.WriteString(end.(json.Delim).String())
			} else {
				first := true
				for d.More() {
					if !first {
						reenc.WriteByte(',')
					}
					first = false
					if err := walk(); err != nil {
						return err
					}
				}
				end, _ := d.Token()
				reenc.WriteString(end.(json.Delim).String())
			}
		case json.Number:
			s := string(tok)
			if why := numberFormError(s); why != "" {
				return fmt.Errorf("number %s not in canonical form: %s", s, why)
			}
			reenc.WriteString(s)
		case string:
			reenc.Write(canon.AppendString(nil, tok))
		case bool:
			reenc.WriteString(strconv.FormatBool(tok))
		case nil:
			reenc.WriteString("null")
		}
		return nil
	}
	if err := walk(); err != nil {
		t.Fatalf("canonical %s: %v", c, err)
	}
	if !bytes.Equal(reenc.Bytes(), c) {
		t.Fatalf("canonical %s\nre-encoded %s", c, reenc.Bytes())
	}
}

// canonicalViaStdlib is an independent canonical encoding for trees whose
// numbers are all integer literals below 1e21 and whose strings avoid U+2028/U+2029
// (which encoding/json escapes): encoding/json already sorts map keys by
// bytes and, without HTML escaping, escapes exactly what RFC 8785 does.
func canonicalViaStdlib(t *testing.T, data []byte) ([]byte, bool) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	ok := true
	var fix func(v any) any
	fix = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			// Integers of 22 digits and more are written in exponent
			// form (ECMAScript's choice from 1e21 on).
			if strings.ContainsAny(string(v), ".eE") || len(strings.TrimPrefix(string(v), "-")) > 21 {
				ok = false
			}
			if v == "-0" {
				return json.Number("0")
			}
		case string:
			if strings.ContainsAny(v, "\u2028\u2029") {
				ok = false
			}
		case []any:
			for i := range v {
				v[i] = fix(v[i])
			}
		case map[string]any:
			for k := range v {
				if strings.ContainsAny(k, "\u2028\u2029") {
					ok = false
				}
				v[k] = fix(v[k])
			}
		}
		return v
	}
	v = fix(v)
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), ok
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	compared := 0
	for i := range iterations(10_000) {
		g := &gen{r: r}
		g.value()
		in := []byte(g.b.String())
		if !json.Valid(in) || !utf8.Valid(in) {
			t.Fatalf("generator produced invalid JSON %q", in)
		}
		c, v, err := canon.Parse(in, canon.Limits{})
		if err != nil {
			if strings.Contains(err.Error(), "number out of range") {
				continue // e.g. 9e329: encoding/json reads it as a Number only
			}
			t.Fatalf("#%d Parse(%q): %v", i, in, err)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical %q is not valid JSON", c)
		}
		// Same value as encoding/json reads from the input.
		if a, b := decodeStd(t, in), decodeStd(t, c); !reflect.DeepEqual(a, b) {
			t.Fatalf("#%d input %q\ncanonical %q\n  input value %#v\ncanon value %#v", i, in, c, a, b)
		}
		// The returned tree is the canonical text's tree.
		if a, b := decodeStd(t, c), normalize(v); !reflect.DeepEqual(a, b) {
			t.Fatalf("#%d canonical %q: tree %#v, want %#v", i, c, b, a)
		}
		checkCanonicalShape(t, c)
		// Idempotent.
		c2, _, err := canon.Parse(c, canon.Limits{})
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("#%d canonical %q re-parses to %q, %v", i, c, c2, err)
		}
		// Byte-exact against encoding/json where it is a canonicalizer.
		if want, ok := canonicalViaStdlib(t, in); ok {
			compared++
			if !bytes.Equal(c, want) {
				t.Fatalf("#%d input %q\n canon  %s\n stdlib %s", i, in, c, want)
			}
		}
	}
	if compared < iterations(10_000)/30 {
		t.Errorf("only %d byte-exact comparisons with encoding/json", compared)
	}
}

// Reordering members and changing white space and escapes never changes
// the canonical form.
func TestCanonicalIgnoresSpelling(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range iterations(2000) {
		g := &gen{r: r}
		g.depth = 5
		g.b.WriteByte('{')
		type kv struct{ k, v string }
		var members []kv
		seen := map[string]bool{}
		for range 1 + r.IntN(6) {
			name := string(rune('a' + r.IntN(26)))
			if seen[name] {
				continue
			}
			seen[name] = true
			sub := &gen{r: r, depth: 5}
			sub.value()
			members = append(members, kv{name, sub.b.String()})
		}
		doc := func() []byte {
			var b strings.Builder
			b.WriteString(" { ")
			for i, m := range members {
				if i > 0 {
					b.WriteString(" ,\n")
				}
				fmt.Fprintf(&b, `"\u%04x" : %s`, m.k[0], m.v)
			}
			b.WriteString(" } ")
			return []byte(b.String())
		}
		c1, _, err := canon.Parse(doc(), canon.Limits{})
		if err != nil {
			continue
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		c2, _, err := canon.Parse(doc(), canon.Limits{})
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("reordered members: %s vs %s (%v)", c1, c2, err)
		}
		sort.Slice(members, func(i, j int) bool { return members[i].k < members[j].k })
		var want strings.Builder
		want.WriteByte('{')
		for i, m := range members {
			if i > 0 {
				want.WriteByte(',')
			}
			cv, _, _ := canon.Parse([]byte(m.v), canon.Limits{})
			fmt.Fprintf(&want, `"%s":%s`, m.k, cv)
		}
		want.WriteByte('}')
		if string(c1) != want.String() {
			t.Fatalf("canonical %s, want %s", c1, want.String())
		}
	}
}

// spell writes the value 0.digits × 10^point (digits without leading or
// trailing zeros) as random, valid JSON number text.
func spell(r *rand.Rand, neg bool, digits string, point int) string {
	m := digits + strings.Repeat("0", r.IntN(4)) // trailing zeros
	q := r.IntN(len(m) + 1)                      // decimal point after q digits
	lead := ""
	if q == 0 {
		lead = strings.Repeat("0", r.IntN(3)) // 0.000ddd
		m = lead + m
	}
	// The text's value is int(m) × 10^(q-len(m)+e), and int(m) is
	// int(digits) × 10^trailing; the wanted value is int(digits) ×
	// 10^(point-len(digits)).
	trailing := len(m) - len(lead) - len(digits)
	e := point - len(digits) - trailing + len(m) - q
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if q == 0 {
		b.WriteString("0")
	} else {
		b.WriteString(m[:q])
	}
	if q < len(m) {
		b.WriteString("." + m[q:])
	}
	if e != 0 || r.IntN(3) == 0 {
		b.WriteByte("eE"[r.IntN(2)])
		switch {
		case e < 0:
			b.WriteByte('-')
			e = -e
		case r.IntN(2) == 0:
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(e))
	}
	return b.String()
}

// Numbers keep their exact decimal value, every spelling of one value has
// the same canonical text, and that text is in canonical form.
func TestNumbersExactAndUnique(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for i := range iterations(5_000) {
		n := 1 + r.IntN(40)
		if r.IntN(2) == 0 {
			n = 1 + r.IntN(17)
		}
		d := []byte{byte('1' + r.IntN(9))}
		for len(d) < n {
			d = append(d, byte('0'+r.IntN(10)))
		}
		for len(d) > 1 && d[len(d)-1] == '0' {
			d = d[:len(d)-1]
		}
		digits := string(d)
		point := r.IntN(600) - 300
		neg := r.IntN(2) == 0
		want, _ := new(big.Rat).SetString(digits + "e" + strconv.Itoa(point-len(digits)))
		if neg {
			want.Neg(want)
		}
		var first string
		for j := range 6 {
			in := spell(r, neg, digits, point)
			if v := exactValue(in); v == nil || v.Cmp(want) != 0 {
				t.Fatalf("test bug: spell(%s, %d) = %s has value %v, want %v", digits, point, in, v, want)
			}
			c, _, err := canon.Parse([]byte(in), canon.Limits{})
			if err != nil {
				if point > 309 && strings.Contains(err.Error(), "out of range") {
					break
				}
				t.Fatalf("#%d Parse(%s): %v", i, in, err)
			}
			got := string(c)
			if why := numberFormError(got); why != "" {
				t.Fatalf("Parse(%s) = %s: %s", in, got, why)
			}
			if v := exactValue(got); v.Cmp(want) != 0 {
				t.Fatalf("Parse(%s) = %s changes the value", in, got)
			}
			if j == 0 {
				first = got
			} else if got != first {
				t.Fatalf("one value, two canonical forms: %s and %s (input %s)", first, got, in)
			}
		}
	}
}

// Where RFC 8785 and exact decimals can agree, they do: for numbers written
// with at most 15 significant digits within float64's normal range, the
// canonical text is RFC 8785's (FormatFloat of the float64).
func TestParseMatchesRFC8785(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range iterations(50_000) {
		n := 1 + r.IntN(15)
		d := []byte{byte('1' + r.IntN(9))}
		for len(d) < n {
			d = append(d, byte('0'+r.IntN(10)))
		}
		point := r.IntN(600) - 300
		in := spell(r, r.IntN(2) == 0, string(d), point)
		f, err := strconv.ParseFloat(in, 64)
		if err != nil || f != 0 && math.Abs(f) < 0x1p-1022 {
			continue // out of range or subnormal
		}
		c, _, err := canon.Parse([]byte(in), canon.Limits{})
		if err != nil {
			t.Fatalf("Parse(%s): %v", in, err)
		}
		if want := canon.FormatFloat(f); string(c) != want {
			t.Fatalf("Parse(%s) = %s, RFC 8785 gives %s", in, c, want)
		}
	}
	// Beyond 15 digits (or in the subnormal range) they can differ; canon
	// keeps the exact value where RFC 8785 rounds to the float64.
	for in, rfc := range map[string]string{
		"9007199254740993":      "9007199254740992",  // 16 digits
		"333333333.33333329":    "333333333.3333333", // 17 digits (the RFC's own example)
		"0.30000000000000001":   "0.3",               // 17 digits
		"1.23456789012345e-320": "1.2347e-320",       // subnormal
		"1e-400":                "0",                 // underflow
	} {
		f, _ := strconv.ParseFloat(in, 64)
		if got := canon.FormatFloat(f); got != rfc {
			t.Errorf("FormatFloat(%s) = %s, want %s", in, got, rfc)
		}
		c, _, err := canon.Parse([]byte(in), canon.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if string(c) == rfc {
			t.Errorf("Parse(%s) = %s: rounded like a float64", in, c)
		}
		if v := exactValue(string(c)); v.Cmp(exactValue(in)) != 0 {
			t.Errorf("Parse(%s) = %s: value changed", in, c)
		}
	}
}

// iterations scales a random test's size down in -short mode.
func iterations(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}
