package guard

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolguard/toolguard/internal/canon"
)

// Secrets. Every string that leaves the guard for the model, the store, a
// record, a log or a span passes one redaction, the Redactor's:
//
//   - A tool's output (and a receipt, which is an output) is parsed once
//     and walked once. Each member a secret path names
//     (ToolSpec.SecretOutput, and the paths the tool names at run time
//     with Invocation.WithholdOutput) is replaced by SecretPlaceholder of
//     its SecretHash, whatever its value (a string, a number, an object, an
//     array; null and "" are left: nothing to withhold). In every other
//     string, number and member name, what the Detector finds is replaced
//     in place by its placeholder. Output that is not valid JSON (invalid
//     UTF-8, a duplicate member, nesting beyond 10,000) is withheld whole,
//     as is output whose secret paths do not parse.
//   - A typed error's message (NewError), which the model is shown: what
//     the detector finds, and every value the model gave for a declared
//     argument secret (ToolSpec.SecretArguments), is replaced by its
//     placeholder.
//   - An argument member LoggedArguments copies into the audit record: a
//     declared secret is written as {"hmac-sha256": SecretHash}, and what
//     the detector finds in its strings, numbers and member names is
//     replaced by its placeholder. The fingerprint, deduplication and the
//     grant's binding see the real value.
//
// The model cannot pass a placeholder back to have it resolved: a tool that
// needs a secret takes its name and reads it from the host's vault itself,
// so no secret, not even an opaque handle to one, travels through the
// model. The hash is HMAC-SHA256, keyed with Options.SecretKey, of the
// value's canonical JSON: the audit chain verifies as ever, the records
// hold no secret, and an auditor with the key checks a known value against
// a record (SecretHash). A tool with no secrets, under a guard without a
// Detector, costs nothing more.

// SecretHash is the hex HMAC-SHA256, keyed with key, of value's canonical
// JSON (the JSON of a Go value, or JSON text as json.RawMessage): what the
// audit record and the placeholder hold of a secret. An auditor calls it
// with a known value to check it against a record.
func SecretHash(key []byte, value any) (string, error) {
	var raw []byte
	if r, ok := value.(json.RawMessage); ok {
		raw = r
	} else {
		b, err := json.Marshal(value)
		if err != nil {
			return "", err
		}
		raw = b
	}
	c, _, err := canon.Parse(raw, canon.Limits{})
	if err != nil {
		return "", err
	}
	return secretHash(key, c), nil
}

func secretHash(key, canonical []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(canonical)
	return hex.EncodeToString(m.Sum(nil))
}

// SecretPlaceholder is what the model, the store and the logs get instead
// of an output secret whose SecretHash is hash.
func SecretPlaceholder(hash string) string {
	return "[secret withheld; hmac-sha256:" + hash + "]"
}

// Detector finds secrets a tool did not declare in text that leaves the
// guard (Options.Detector): provider API keys, private keys, tokens, card
// numbers. Find returns the substrings of text to withhold, as they stand
// in it; the guard replaces each, wherever it stands in the text, by its
// placeholder. The guard asks about an output's whole JSON text first,
// and walks the output only when something was found (or a path declares
// a secret): Find must find a secret in JSON text, JSON-escaped (as
// package secretscan does). It must be safe for concurrent use.
type Detector interface {
	Find(text string) []string
}

// Redactor withholds secrets from what leaves the guard, with one key and
// one detector: a Guard's (Options.SecretKey and Options.Detector), or a
// host's own for what it shows beside the guard (package approvals' inbox).
// It is safe for concurrent use.
type Redactor struct {
	key      []byte
	detector Detector
	compiled sync.Map // "o"/"a" and a tool's name → *compiledPaths
}

// NewRedactor returns a redactor hashing with key (empty: a random key of
// its own, so placeholders are stable only within the process) and
// finding undeclared secrets with d (nil: declared secrets only).
func NewRedactor(key []byte, d Detector) *Redactor {
	return &Redactor{key: secretKey(key), detector: d}
}

// secretKey is a copy of k, or a random key when k is empty.
func secretKey(k []byte) []byte {
	if len(k) > 0 {
		return bytes.Clone(k)
	}
	k = make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// JSON returns the JSON value v with what the detector finds in its
// strings, numbers and member names replaced by placeholders; v itself
// when nothing is found. JSON that is not valid is withheld whole.
func (r *Redactor) JSON(v []byte) []byte {
	if r.detector == nil || len(v) == 0 {
		return v
	}
	return r.redact(v, nil, nil, r.placeholderJSON)
}

// paths returns the compiled secret paths of a tool's spec, kind "o" for
// its output and "a" for its arguments, compiled once per tool.
func (r *Redactor) paths(kind, tool string, src []string) *compiledPaths {
	if len(src) == 0 {
		return nil
	}
	key := kind + tool
	if c, ok := r.compiled.Load(key); ok && slices.Equal(c.(*compiledPaths).src, src) {
		return c.(*compiledPaths)
	}
	c := compilePaths(slices.Clone(src))
	r.compiled.Store(key, c)
	return c
}

// output withholds the secrets of a tool's output: the spec's paths, the
// ones the tool named at run time, and what the detector finds.
func (r *Redactor) output(tool string, declared, runtime []string, out []byte) []byte {
	if len(out) == 0 || (len(declared) == 0 && len(runtime) == 0 && r.detector == nil) {
		return out
	}
	var paths [][]step
	if c := r.paths("o", tool, declared); c != nil {
		if c.err != nil {
			return r.whole(out)
		}
		paths = c.paths
	}
	if len(runtime) > 0 {
		c := compilePaths(runtime)
		if c.err != nil {
			return r.whole(out)
		}
		paths = append(slices.Clip(paths), c.paths...)
	}
	return r.redact(out, paths, roots(paths), r.placeholderJSON)
}

// placeholderJSON is the JSON that replaces an output secret.
func (r *Redactor) placeholderJSON(canonical []byte) []byte {
	return canon.AppendString(nil, SecretPlaceholder(secretHash(r.key, canonical)))
}

// hashJSON is the JSON that replaces an argument secret in the audit
// record.
func (r *Redactor) hashJSON(canonical []byte) []byte {
	b := append([]byte(nil), `{"hmac-sha256":"`...)
	b = append(b, secretHash(r.key, canonical)...)
	return append(b, `"}`...)
}

// whole withholds a text that cannot be walked.
func (r *Redactor) whole(v []byte) []byte {
	return r.placeholderJSON(canon.AppendString(nil, string(v)))
}

// redact withholds the secrets of the JSON value v. The detector reads v's
// whole text once; when it finds nothing and no path starts (no states),
// v is returned as it is, unparsed. Otherwise v is walked once, from the
// states of paths: where a path ends, the value is replaced by what
// declared makes of its canonical JSON; in every other string, number and
// member name, what the detector finds in it and what it found in the
// whole text (as it stood there, and JSON-unescaped) is replaced by
// placeholders. The whole text's finds matter: a find may rest on context
// outside its string ("card_number":"4111…"). A find the walk could not
// replace (one across strings), and v that is not valid JSON, withhold v
// whole. It returns v itself when nothing changed.
func (r *Redactor) redact(v []byte, paths [][]step, states []state, declared func([]byte) []byte) []byte {
	src := string(v)
	var found []string
	if r.detector != nil {
		found = safeFind(r.detector, src)
	}
	if len(found) == 0 && len(states) == 0 {
		return v
	}
	w := walk{r: r, paths: paths, declared: declared, src: src, found: unescaped(found)}
	if err := w.run(v, states); err != nil {
		return r.whole(v)
	}
	if len(w.edits) == 0 && len(found) == 0 {
		return v
	}
	out := w.apply(nil)
	for _, f := range found {
		if f != "" && bytes.Contains(out, []byte(f)) {
			return r.whole(v)
		}
	}
	return out
}

// unescaped returns the finds and, beside each that holds a JSON escape,
// the text it stands for.
func unescaped(found []string) []string {
	out := found
	for _, f := range found {
		if strings.IndexByte(f, '\\') < 0 {
			continue
		}
		if u, err := jsontext.AppendUnquote(nil, `"`+f+`"`); err == nil {
			out = append(out, string(u))
		}
	}
	return out
}

// walk is one pass over one JSON text.
type walk struct {
	r        *Redactor
	paths    [][]step
	declared func(canonical []byte) []byte
	src      string // the text, as a string: strings without escapes are slices of it
	// found is what the detector found in the whole text: the walk asks
	// the detector about each string only when it found something.
	found []string
	edits []edit
}

// edit replaces src[start:end] by with.
type edit struct {
	start, end int
	with       []byte
}

var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// noInput is what a pooled decoder reads, so that it holds no output.
type noInput struct{}

func (noInput) Read([]byte) (int, error) { return 0, io.EOF }

// errTrailing: more than one value.
var errTrailing = errors.New("guard: data after the JSON value")

func (w *walk) run(v []byte, states []state) error {
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(noInput{})
		decoders.Put(dec)
	}()
	// Duplicate names are allowed: the walk withholds in every member of
	// a name, so whichever a reader keeps, it keeps none in clear (and the
	// check would cost a tenth of the walk).
	dec.Reset(bytes.NewBuffer(v), jsontext.AllowDuplicateNames(true))
	if err := w.value(dec, states); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// apply returns dst with src, its edits applied.
func (w *walk) apply(dst []byte) []byte {
	at := 0
	for _, e := range w.edits {
		dst = append(dst, w.src[at:e.start]...)
		dst = append(dst, e.with...)
		at = e.end
	}
	return append(dst, w.src[at:]...)
}

// read reads the next value (or member name) and returns its span in src.
func (w *walk) read(dec *jsontext.Decoder) (start, end int, err error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return 0, 0, err
	}
	end = int(dec.InputOffset())
	return end - len(raw), end, nil
}

// str is the text of the JSON string src[start:end].
func (w *walk) str(start, end int) (string, error) {
	raw := w.src[start:end]
	if strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	return string(b), err
}

func (w *walk) value(dec *jsontext.Decoder, states []state) error {
	if len(states) > 0 && accepts(w.paths, states) {
		return w.secret(dec)
	}
	if len(states) == 0 && len(w.found) == 0 {
		return dec.SkipValue()
	}
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			start, end, err := w.read(dec)
			if err != nil {
				return err
			}
			name, err := w.str(start, end)
			if err != nil {
				return err
			}
			w.detect(start, end, name)
			var next []state
			if len(states) > 0 {
				next = advance(w.paths, states, name, -1)
			}
			if err := w.value(dec, next); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			var next []state
			if len(states) > 0 {
				next = advance(w.paths, states, "", i)
			}
			if err := w.value(dec, next); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	case '"':
		start, end, err := w.read(dec)
		if err != nil {
			return err
		}
		text, err := w.str(start, end)
		if err != nil {
			return err
		}
		if inner := inText(w.paths, states); len(inner) > 0 {
			w.jsonText(start, end, text, inner)
			return nil
		}
		w.detect(start, end, text)
		return nil
	case '0':
		start, end, err := w.read(dec)
		if err != nil {
			return err
		}
		w.detect(start, end, w.src[start:end])
		return nil
	}
	return dec.SkipValue() // a literal, or the error it is
}

// secret replaces the next value, a declared secret.
func (w *walk) secret(dec *jsontext.Decoder) error {
	start, end, err := w.read(dec)
	if err != nil {
		return err
	}
	raw := w.src[start:end]
	if raw == "null" || raw == `""` {
		return nil // nothing to withhold
	}
	var c []byte
	if raw[0] == '"' {
		text, err := w.str(start, end)
		if err != nil {
			return err
		}
		c = canon.AppendString(nil, text)
	} else if c, _, err = canon.Parse([]byte(raw), canon.Limits{MaxBytes: len(raw), MaxDepth: 10000}); err != nil {
		return err
	}
	w.edits = append(w.edits, edit{start: start, end: end, with: w.declared(c)})
	return nil
}

// jsonText walks the JSON text a string holds, from the states inner; the
// string is written again with what was withheld in it, or withheld whole
// when it is not JSON.
func (w *walk) jsonText(start, end int, text string, inner []state) {
	if text == "" {
		return
	}
	in := walk{r: w.r, paths: w.paths, declared: w.declared, src: text, found: w.found}
	if err := in.run([]byte(text), inner); err != nil {
		w.edits = append(w.edits, edit{start: start, end: end, with: w.declared(canon.AppendString(nil, text))})
		return
	}
	if len(in.edits) > 0 {
		w.edits = append(w.edits, edit{start: start, end: end, with: canon.AppendString(nil, string(in.apply(nil)))})
	}
}

// detect asks the detector about the text of one string, member name or
// number, src[start:end]; what it finds is replaced in place, and a number
// with a secret in it becomes a string.
func (w *walk) detect(start, end int, text string) {
	if len(w.found) == 0 {
		return // the detector found nothing in the whole text
	}
	hits := safeFind(w.r.detector, text)
	for _, f := range w.found {
		if f != "" && strings.Contains(text, f) {
			hits = append(hits, f)
		}
	}
	if out, changed := w.r.replace(text, hits); changed {
		w.edits = append(w.edits, edit{start: start, end: end, with: canon.AppendString(nil, out)})
	}
}

// replace replaces every occurrence of the found substrings of s by their
// placeholders, in one pass (longest first where two start together), and
// reports whether it replaced any.
func (r *Redactor) replace(s string, found []string) (string, bool) {
	if len(found) == 0 {
		return s, false
	}
	found = slices.Clone(found)
	slices.SortFunc(found, func(a, b string) int { return len(b) - len(a) })
	found = slices.Compact(found)
	pairs := make([]string, 0, 2*len(found))
	for _, f := range found {
		if f != "" && strings.Contains(s, f) {
			pairs = append(pairs, f, SecretPlaceholder(secretHash(r.key, canon.AppendString(nil, f))))
		}
	}
	if len(pairs) == 0 {
		return s, false
	}
	return strings.NewReplacer(pairs...).Replace(s), true
}

// text replaces what the detector finds in s, and every occurrence of the
// values also (declared secrets), by placeholders.
func (r *Redactor) text(s string, also []string) string {
	if s == "" || (r.detector == nil && len(also) == 0) {
		return s
	}
	var found []string
	if r.detector != nil {
		found = safeFind(r.detector, s)
	}
	out, _ := r.replace(s, append(found, also...))
	return out
}

// safeFind asks the detector, a panic finding everything: a text the
// detector could not read is withheld whole.
func safeFind(d Detector, s string) (found []string) {
	defer func() {
		if recover() != nil {
			found = []string{s}
		}
	}()
	return d.Find(s)
}

// message is a typed error's message as the model and the store get it:
// what the detector finds in it, and the values of the call's declared
// argument secrets, withheld. A message that cannot be checked (the
// tool's argument secret paths do not parse) is replaced by otherwise.
func (r *Redactor) message(inv *Invocation, msg, otherwise string) string {
	if msg == "" {
		return msg
	}
	var also []string
	if inv != nil && inv.tool != nil {
		if c := r.paths("a", inv.tool.Spec().Name, inv.tool.Spec().SecretArguments); c != nil {
			if c.err != nil {
				return otherwise
			}
			also = argumentSecrets(c.paths, roots(c.paths), inv.args, nil)
		}
	}
	return r.text(msg, also)
}

// argumentSecrets appends to out the text of every string and number at
// or under the places the states reach in v, a parsed argument tree.
func argumentSecrets(paths [][]step, states []state, v any, out []string) []string {
	if len(states) == 0 {
		return out
	}
	if accepts(paths, states) {
		return leaves(v, out)
	}
	switch t := v.(type) {
	case map[string]any:
		for k, m := range t {
			out = argumentSecrets(paths, advance(paths, states, k, -1), m, out)
		}
	case []any:
		for i, m := range t {
			out = argumentSecrets(paths, advance(paths, states, "", i), m, out)
		}
	case string:
		if inner := inText(paths, states); len(inner) > 0 {
			if _, tree, err := canon.Parse([]byte(t), canon.Limits{}); err == nil {
				return argumentSecrets(paths, inner, tree, append(out, t))
			}
			return append(out, t)
		}
	}
	return out
}

// leaves appends the text of every string and number in v.
func leaves(v any, out []string) []string {
	switch t := v.(type) {
	case string:
		if t != "" {
			out = append(out, t)
		}
	case json.Number:
		out = append(out, string(t))
	case map[string]any:
		for k, m := range t {
			out = leaves(m, append(out, k))
		}
	case []any:
		for _, m := range t {
			out = leaves(m, out)
		}
	}
	return out
}

// appendLogged appends the audit record's copy of the argument member
// name, whose value is v: declared secrets as their keyed hashes, and what
// the detector finds replaced by placeholders.
func (r *Redactor) appendLogged(dst []byte, inv *Invocation, name string, v any) []byte {
	if r == nil {
		return canon.AppendValue(dst, v)
	}
	var paths [][]step
	var states []state
	if c := r.paths("a", inv.tool.Spec().Name, inv.tool.Spec().SecretArguments); c != nil {
		if c.err != nil {
			return append(dst, r.hashJSON(canon.AppendValue(nil, v))...)
		}
		paths = c.paths
		states = advance(paths, roots(paths), name, -1)
	}
	start := len(dst)
	dst = canon.AppendValue(dst, v)
	if len(states) == 0 && r.detector == nil {
		return dst
	}
	member := dst[start:]
	out := r.redact(member, paths, states, r.hashJSON)
	if &out[0] == &member[0] && len(out) == len(member) {
		return dst // unchanged
	}
	return append(dst[:start], out...)
}
