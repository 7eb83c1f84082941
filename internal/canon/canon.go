// Package canon parses untrusted JSON strictly and writes it back in one
// canonical form, so that the same intent always hashes to the same
// fingerprint.
//
// The canonical form is the one of RFC 8785 (JSON Canonicalization Scheme)
// with two documented deviations that only matter for exotic input: object
// members are sorted by the bytes of their UTF-8 names (code point order,
// where RFC 8785 uses UTF-16 code units), and numbers are written from
// their exact decimal value rather than from the nearest float64, so a
// number with more than 17 significant digits keeps them all (1e21,
// 1000000000000000000000 and 1.0e21 are one number; 9007199254740993 and
// 9007199254740992 are two). Everything else follows RFC 8785: no
// insignificant white space, strings with only the mandatory escapes, and
// numbers in the shortest form with ECMAScript's choice of notation.
//
// Parsing is strict where encoding/json is lenient, because a lenient
// parser is an injection vector when two components read the same text
// differently: duplicate object members, invalid UTF-8, lone surrogate
// escapes, numbers whose magnitude exceeds float64's largest finite value
// (1e400) and nesting deeper than the limit are all errors. Numbers below
// float64's smallest (1e-400) are no error: like every number they are kept
// exactly, as decimals, never rounded to zero.
package canon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting limit used when Limits.MaxDepth is zero.
const DefaultMaxDepth = 64

// DefaultMaxBytes is the input size limit used when Limits.MaxBytes is zero.
const DefaultMaxBytes = 512 << 10

// Limits bounds what Parse accepts. The zero value means the defaults.
type Limits struct {
	MaxDepth int // deepest nesting of arrays and objects; 0 means DefaultMaxDepth
	MaxBytes int // largest input in bytes; 0 means DefaultMaxBytes
}

// Error describes why input was rejected. Its text is safe to show a model:
// it names the problem and a byte offset, never the input itself.
type Error struct {
	Offset int    // byte offset of the problem
	Reason string // short description
	err    error  // a sentinel it wraps, if any
}

// Error returns the reason and the byte offset.
func (e *Error) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Reason) }

// Unwrap returns the sentinel the error wraps: ErrTooLarge, or nil.
func (e *Error) Unwrap() error { return e.err }

// ErrTooLarge is wrapped by the error for input over Limits.MaxBytes:
// errors.Is(err, ErrTooLarge) reports it.
var ErrTooLarge = errors.New("input too large")

// Parse checks data strictly and returns its canonical encoding together with
// the decoded value: nil, bool, string, json.Number (in canonical text),
// []any or map[string]any, the shape JSON Schema validators take.
func Parse(data []byte, lim Limits) (canonical []byte, value any, err error) {
	maxBytes := lim.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(data) > maxBytes {
		return nil, nil, &Error{Offset: maxBytes, Reason: fmt.Sprintf("%v: %d bytes, limit %d", ErrTooLarge, len(data), maxBytes), err: ErrTooLarge}
	}
	p := parser{data: data, maxDepth: lim.MaxDepth, out: make([]byte, 0, len(data))}
	if p.maxDepth == 0 {
		p.maxDepth = DefaultMaxDepth
	}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, nil, p.fail("unexpected data after the value")
	}
	return p.out, v, nil
}

// IsTooLarge reports whether err came from input over the size limit.
func IsTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

type parser struct {
	data     []byte
	pos      int
	maxDepth int
	out      []byte
}

func (p *parser) fail(reason string) error { return &Error{Offset: p.pos, Reason: reason} }

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		p.out = appendString(p.out, s)
		return s, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(word string) error {
	if !strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+len(word))]), word) {
		return p.fail("invalid literal")
	}
	p.pos += len(word)
	p.out = append(p.out, word...)
	return nil
}

type member struct {
	name  string
	start int // offset of the member's canonical "name":value in p.out
	end   int
}

func (p *parser) object(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, p.fail(fmt.Sprintf("nesting deeper than %d", p.maxDepth))
	}
	p.pos++ // {
	obj := map[string]any{}
	// Members are written to p.out in input order, each as "name":value;
	// if they turn out not to be sorted they are reordered at the end.
	base := len(p.out)
	p.out = append(p.out, '{')
	var small [8]member // most tool arguments have few members
	members := small[:0]
	sorted := true
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return obj, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("expected a member name")
		}
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[name]; dup {
			return nil, p.fail("duplicate member name")
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("expected ':'")
		}
		p.pos++
		p.skipSpace()
		if len(members) > 0 {
			p.out = append(p.out, ',')
			sorted = sorted && members[len(members)-1].name < name
		}
		start := len(p.out)
		p.out = appendString(p.out, name)
		p.out = append(p.out, ':')
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		obj[name] = v
		members = append(members, member{name: name, start: start, end: len(p.out)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input in object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == '}' {
			p.pos++
			break
		}
		return nil, p.fail("expected ',' or '}'")
	}
	if !sorted {
		segments := slices.Clone(p.out[base:])
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		p.out = append(p.out[:base], '{')
		for i, m := range members {
			if i > 0 {
				p.out = append(p.out, ',')
			}
			p.out = append(p.out, segments[m.start-base:m.end-base]...)
		}
	}
	p.out = append(p.out, '}')
	return obj, nil
}

func (p *parser) array(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, p.fail(fmt.Sprintf("nesting deeper than %d", p.maxDepth))
	}
	p.pos++ // [
	arr := []any{}
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return arr, nil
	}
	for {
		p.skipSpace()
		if len(arr) > 0 {
			p.out = append(p.out, ',')
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input in array")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == ']' {
			p.pos++
			p.out = append(p.out, ']')
			return arr, nil
		}
		return nil, p.fail("expected ',' or ']'")
	}
}

// str parses a string literal starting at the opening quote.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", &Error{Offset: start, Reason: "invalid UTF-8 in string"}
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("control character in string")
		}
		p.pos++
	}
	var b strings.Builder
	b.Write(p.data[start:p.pos])
	for {
		if p.pos >= len(p.data) {
			return "", p.fail("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				return "", &Error{Offset: start, Reason: "invalid UTF-8 in string"}
			}
			return s, nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		// Escape sequence.
		if p.pos+1 >= len(p.data) {
			return "", p.fail("unterminated escape")
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.fail("lone surrogate escape")
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", p.fail("invalid surrogate pair")
				}
			}
			b.WriteRune(r)
		default:
			return "", p.fail("invalid escape")
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.fail("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, p.fail("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

func (p *parser) number() (any, error) {
	start := p.pos
	neg := false
	if p.data[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if n := digits(); n == 0 {
		return nil, p.fail("invalid number")
	} else if n > 1 && p.data[intStart] == '0' {
		return nil, &Error{Offset: intStart, Reason: "leading zero in number"}
	}
	intPart := p.data[intStart:p.pos]
	var frac []byte
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		fs := p.pos
		if digits() == 0 {
			return nil, p.fail("invalid fraction")
		}
		frac = p.data[fs:p.pos]
	}
	exp := int64(0)
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		expNeg := false
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			expNeg = p.data[p.pos] == '-'
			p.pos++
		}
		es := p.pos
		if digits() == 0 {
			return nil, p.fail("invalid exponent")
		}
		for _, c := range p.data[es:p.pos] {
			exp = exp*10 + int64(c-'0')
			if exp > maxExponent {
				return nil, &Error{Offset: start, Reason: "number out of range"}
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	canonical, ok := formatDecimal(neg, intPart, frac, exp)
	if !ok {
		return nil, &Error{Offset: start, Reason: "number out of range"}
	}
	p.out = append(p.out, canonical...)
	return json.Number(canonical), nil
}

// maxExponent bounds exponents so that exponent arithmetic cannot overflow;
// values beyond float64's range are rejected anyway.
const maxExponent = 1 << 20

// formatDecimal writes the exact decimal value sign·int.frac·10^exp in the
// number form of RFC 8785 (ECMAScript's Number.prototype.toString) applied to
// its exact digits: the shortest digit string without leading or trailing
// zeros, in plain notation when the decimal point falls from 10^-6 to 10^21
// and in exponent notation (1e+21, 1.5e-7) outside. For any number written
// with at most 15 significant digits in float64's normal range this is RFC
// 8785's output exactly; a longer number (333333333.33333329 has 17 digits
// where RFC 8785 writes 333333333.3333333), a subnormal or a number below
// float64's range keeps every digit instead of being rounded to a float64, so
// two different values never share a form and one value has only one.
// Values whose magnitude exceeds float64's range are rejected.
func formatDecimal(neg bool, intPart, frac []byte, exp int64) (string, bool) {
	// All significant digits, and the position of the decimal point.
	d := make([]byte, 0, len(intPart)+len(frac))
	d = append(d, intPart...)
	d = append(d, frac...)
	point := int64(len(intPart)) + exp
	lead := 0
	for lead < len(d) && d[lead] == '0' {
		lead++
	}
	d = d[lead:]
	point -= int64(lead)
	for len(d) > 0 && d[len(d)-1] == '0' {
		d = d[:len(d)-1]
	}
	if len(d) == 0 {
		return "0", true
	}
	// Range: the value is 0.d × 10^point.
	if point >= 309 {
		if f, err := strconv.ParseFloat("0."+string(d)+"e"+strconv.FormatInt(point, 10), 64); err != nil || math.IsInf(f, 0) {
			return "", false
		}
	}
	out := formatDigits(string(d), int(point))
	if neg {
		return "-" + out, true
	}
	return out, true
}

// formatDigits places the decimal point in the digits (no leading or
// trailing zeros) with value 0.digits × 10^n, ECMAScript style.
func formatDigits(digits string, n int) string {
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	e := n - 1
	sign := "+"
	if e < 0 {
		sign = "-"
		e = -e
	}
	if k == 1 {
		return digits + "e" + sign + strconv.Itoa(e)
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(e)
}

// FormatFloat writes f the way ECMAScript's Number.prototype.toString does,
// which is the number form of RFC 8785: the shortest digits that read back to
// f, in plain notation for exponents from -6 to 20 and in exponent notation
// (1e+21, 1.5e-7) outside that range.
func FormatFloat(f float64) string {
	if f == 0 {
		return "0"
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// Shortest round-trip digits and decimal exponent: d.ddddde±XX.
	mant, expPart, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	exp, _ := strconv.Atoi(expPart)
	out := formatDigits(strings.Replace(mant, ".", "", 1), exp+1)
	if neg {
		return "-" + out
	}
	return out
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string with only the escapes RFC 8785
// requires.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendString appends s to dst as a canonical JSON string.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// AppendValue appends the canonical JSON of a value tree as Parse returns it
// (nil, bool, string, json.Number, []any, map[string]any). Other types are
// written as null.
func AppendValue(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if v {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case string:
		return appendString(dst, v)
	case json.Number:
		return append(dst, v...)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		dst = append(dst, '{')
		for i, k := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = AppendValue(dst, v[k])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}
