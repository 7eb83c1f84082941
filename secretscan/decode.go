package secretscan

import (
	"strings"
	"unicode/utf8"
)

// Decoding. A secret is often not in a tool's output as it was issued: a
// URL holds it percent-encoded (after "%3D", or "%253D" in a URL inside a
// URL), JSON in a string holds it escaped ("\"", "\\/", "\n" in a private
// key), a config or a token holds it base64-encoded. Find runs its rules
// over the text, and then over the text decoded, a layer at a time, up to
// maxDepth layers deep: JSON string escapes undone, percent-encoding undone,
// and each run of base64 that decodes to text. Each layer knows where its
// bytes came from, so what is found in it is returned as it stands in the
// text Find was given: a key found in the percent-decoded text is returned
// percent-encoded, and a secret found in decoded base64 is withheld as the
// whole base64 run that holds it (its lines and their breaks, where the
// run is wrapped as in a PEM body or a MIME part). A layer is made only
// where the text holds what it undoes (a backslash escape, a %XX, a run of
// at least minBase64 base64 characters), so text without them costs one
// pass and no allocation. What all layers of one Find decode is bounded
// by decodeBudget: a text built to branch at every layer (escapes,
// %XX and base64 in each) stops being decoded there, and costs at most
// some twenty passes over its length.

const (
	// maxDepth bounds the layers of encoding Find undoes: a JSON string in
	// a JSON string in a base64 blob is three, and a fourth is the JSON
	// text of a whole output that holds such a string.
	maxDepth = 4
	// minBase64 is the shortest run of base64 decoded: 15 bytes, fewer than
	// any secret Find knows with the name a text gives it.
	minBase64 = 20
	// minWrapped is the shortest line of a wrapped base64 body (a PEM body
	// has lines of 64, MIME of 76).
	minWrapped = 40
)

// decodeBudget is how many bytes one Find over n bytes may decode, all
// layers together.
func decodeBudget(n int) int { return 16*n + 64<<10 }

// layer is a text decoded from its parent, with where its bytes came from.
type layer struct {
	text string
	// src[i] is the offset in the parent of the encoding that made byte i;
	// src[len(text)] is len(parent).
	src []int32
}

// parent returns where layer's text[a:b] stands in the parent: from the
// start of the encoding of its first byte to the end of that of its last.
func (l *layer) parent(a, b int) (int, int) {
	k := b
	for k < len(l.text) && l.src[k] == l.src[b-1] {
		k++ // the other bytes of one escape (\u00e9 is two)
	}
	return int(l.src[a]), int(l.src[k])
}

// builder makes a layer.
type builder struct {
	b   []byte
	src []int32
}

func (w *builder) add(from int, c ...byte) {
	for _, x := range c {
		w.b = append(w.b, x)
		w.src = append(w.src, int32(from))
	}
}

func (w *builder) done(parentLen int) *layer {
	return &layer{text: string(w.b), src: append(w.src, int32(parentLen))}
}

// unescapeJSON undoes JSON's string escapes (\" \\ \/ \b \f \n \r \t
// \uXXXX, surrogate pairs joined) wherever they are in text; a backslash
// before anything else stays.
func unescapeJSON(text string) *layer {
	w := builder{b: make([]byte, 0, len(text)), src: make([]int32, 0, len(text)+1)}
	for i := 0; i < len(text); {
		c := text[i]
		if c != '\\' || i+1 == len(text) {
			w.add(i, c)
			i++
			continue
		}
		n := 2
		switch e := text[i+1]; e {
		case '"', '\\', '/':
			w.add(i, e)
		case 'b':
			w.add(i, '\b')
		case 'f':
			w.add(i, '\f')
		case 'n':
			w.add(i, '\n')
		case 'r':
			w.add(i, '\r')
		case 't':
			w.add(i, '\t')
		case 'u':
			r, ok := hex4(text, i+2)
			if !ok {
				w.add(i, c)
				n = 1
				break
			}
			n = 6
			if 0xD800 <= r && r < 0xDC00 && i+12 <= len(text) && text[i+6] == '\\' && text[i+7] == 'u' {
				if lo, ok := hex4(text, i+8); ok && 0xDC00 <= lo && lo < 0xE000 {
					r, n = 0x10000+(r-0xD800)<<10+(lo-0xDC00), 12
				}
			}
			w.add(i, utf8.AppendRune(nil, r)...)
		default:
			w.add(i, c)
			n = 1
		}
		i += n
	}
	return w.done(len(text))
}

// hex4 reads the four hex digits at text[i:].
func hex4(text string, i int) (rune, bool) {
	if i+4 > len(text) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(text[i : i+4]) {
		v := unhex(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// unpercent undoes percent-encoding: each %XX is its byte, and '+' a
// space unless the text encodes spaces as %20 (then it was written by a
// path encoder, which leaves '+' as it is).
func unpercent(text string) *layer {
	plus := !strings.Contains(text, "%20")
	w := builder{b: make([]byte, 0, len(text)), src: make([]int32, 0, len(text)+1)}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '%' && i+2 < len(text) && unhex(text[i+1]) >= 0 && unhex(text[i+2]) >= 0:
			w.add(i, byte(unhex(text[i+1])<<4|unhex(text[i+2])))
			i += 2
		case c == '+' && plus:
			w.add(i, ' ')
		default:
			w.add(i, c)
		}
	}
	return w.done(len(text))
}

// base64 alphabets: decoding tables, -1 for a byte outside.
var (
	b64Std = b64Table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
	b64URL = b64Table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
)

func b64Table(alphabet string) (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = int8(i)
	}
	return t
}

// unbase64 decodes a run of base64 (standard or URL alphabet, padded or
// not, its lines broken by \n or \r\n) and returns its text, or false
// when it is not text: a control character other than a tab or a line
// break, or not UTF-8. Binary data (a hash, an image, a random key) is
// told apart in its first bytes, before anything is allocated.
func unbase64(run string) (string, bool) {
	t := &b64Std
	if strings.ContainsAny(run, "-_") {
		if strings.ContainsAny(run, "+/") {
			return "", false // two alphabets: not one base64 text
		}
		t = &b64URL
	}
	var (
		buf     [64]byte // binary data is told apart before it fills this
		out     = buf[:0]
		acc     uint32
		n       int
		scratch [3]byte
	)
	for i := 0; i < len(run); i++ {
		c := run[i]
		if c == '\n' || c == '\r' {
			continue
		}
		if c == '=' {
			break
		}
		v := t[c]
		if v < 0 {
			return "", false
		}
		acc = acc<<6 | uint32(v)
		n++
		if n == 4 {
			scratch = [3]byte{byte(acc >> 16), byte(acc >> 8), byte(acc)}
			if !textBytes(scratch[:]) {
				return "", false
			}
			out = append(out, scratch[:]...)
			acc, n = 0, 0
		}
	}
	switch n {
	case 2:
		out = append(out, byte(acc>>4))
	case 3:
		out = append(out, byte(acc>>10), byte(acc>>2))
	}
	if !textBytes(out) || !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// textBytes reports whether b has no control character but tab and line
// breaks.
func textBytes(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f {
			return false
		}
	}
	return true
}
