package secretcorpus

import (
	"bytes"
	"encoding/xml"
	"html"
	"net/url"
	"slices"
	"strings"
)

// Fragment is the length of the pieces of a form Leak looks for: a sink
// that holds any 12 consecutive characters of a secret, in any of its
// forms, leaks it (a form shorter than that leaks whole).
const Fragment = 12

// encodings are the character-wise encodings a secret takes in the
// corpus's contexts: a form is up to three of them applied in turn (a
// secret in a query of a URL in the query of another URL, or in JSON in a
// string of JSON in a string).
var encodings = []func(string) string{
	jsonEscape,
	func(s string) string { return strings.ReplaceAll(jsonEscape(s), "/", `\/`) },
	url.QueryEscape,
	url.PathEscape,
	xmlEscape,
	func(s string) string { return strings.ReplaceAll(s, `"`, `""`) }, // a CSV cell
}

// forms returns the forms of secrets in text: each raw, and each encoded
// by up to three encodings in turn, that text holds; and tokens (the
// encoded runs that hold them whole).
func forms(text string, secrets, tokens []string) []string {
	var out []string
	var add func(f string, depth int)
	add = func(f string, depth int) {
		if f != "" && strings.Contains(text, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
		if depth == 3 {
			return
		}
		for _, enc := range encodings {
			if e := enc(f); e != f {
				add(e, depth+1)
			}
		}
	}
	for _, s := range secrets {
		add(s, 0)
	}
	for _, t := range tokens {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Leak reports whether s, a sink's output, holds any Fragment characters
// in a row of a form of the case's secrets, or of one of its raw secrets,
// as they are or as a sink writes them again (JSON-escaped,
// HTML-escaped), and returns the first such piece. A placeholder or any
// other text that holds none of them is no leak.
func (c Case) Leak(s string) (string, bool) {
	for _, p := range c.pieces() {
		if strings.Contains(s, p) {
			return p, true
		}
	}
	return "", false
}

// pieces are the fragments Leak looks for.
func (c Case) pieces() []string {
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if f == "" {
			return
		}
		if len(f) <= Fragment {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
			return
		}
		for i := 0; i+Fragment <= len(f); i++ {
			if p := f[i : i+Fragment]; !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	for _, f := range append(slices.Clone(c.Forms), c.Secrets...) {
		add(f)
		add(jsonEscape(f))
		add(html.EscapeString(f))
	}
	return out
}

// jsonEscape is s as encoding/json writes it inside a string, without the
// quotes.
func jsonEscape(s string) string {
	j := jsonString(s)
	return j[1 : len(j)-1]
}

// xmlEscape is s as encoding/xml writes it in an element.
func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
