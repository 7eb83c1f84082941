package guard

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolguard/toolguard/internal/canon"
)

// Declared secrets. A tool names the members of its arguments
// (ToolSpec.SecretArguments) and of its output (ToolSpec.SecretOutput)
// that are secrets: a key read from a vault, a card number, a reset link.
// Package toolset reads them from the struct tag toolguard:"secret".
//
//   - An output secret is replaced, before the outcome is stored, audited,
//     logged or answered, by SecretPlaceholder: the model, the store and
//     every entry point see the placeholder, never the value. The model
//     cannot pass it back to have it resolved: a tool that needs a secret
//     takes its name and reads it from the host's vault itself, so that no
//     secret, not even an opaque handle to one, travels through the model.
//   - An argument secret that LoggedArguments names is written into the
//     audit record as {"hmac-sha256": SecretHash}, never as its value, and
//     no inbox page shows it. The model wrote it, so it is in the model's
//     context already; the fingerprint and deduplication see the value.
//
// The hash is HMAC-SHA256, keyed with Options.SecretKey, of the value's
// canonical JSON: the audit chain verifies as ever, the records hold no
// secret, and an auditor with the key checks a known value against a
// record (SecretHash). A tool with no secrets costs nothing more.

// SecretPath names a member: "name", "name.member" for a member of an
// object, "name[].member" for a member of each element of an array.

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

// secrets are the guard's key of secret hashes and its detector, one
// pointer in each invocation.
type secrets struct {
	key      []byte
	detector Detector
}

// secretKey is the guard's key for secret hashes: Options.SecretKey, or a
// random one of this guard's when the host gave none (placeholders are
// then stable only within the process, and no auditor can check them).
func secretKey(k []byte) []byte {
	if len(k) > 0 {
		return bytes.Clone(k)
	}
	k = make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// redactTree replaces the members paths name in v, a parsed JSON tree, by
// what with gives them, and reports whether it replaced any.
func redactTree(v any, paths []string, with func(any) any) (any, bool) {
	changed := false
	for _, p := range paths {
		var c bool
		v, c = redactPath(v, strings.Split(p, "."), with)
		changed = changed || c
	}
	return v, changed
}

func redactPath(v any, path []string, with func(any) any) (any, bool) {
	if len(path) == 0 {
		if v == nil || v == "" {
			return v, false // a null or empty secret is nothing to withhold
		}
		return with(v), true
	}
	name, each := strings.CutSuffix(path[0], "[]")
	obj, ok := v.(map[string]any)
	if !ok {
		return v, false
	}
	member, ok := obj[name]
	if !ok {
		return v, false
	}
	if !each {
		nv, c := redactPath(member, path[1:], with)
		if c {
			obj[name] = nv
		}
		return v, c
	}
	list, ok := member.([]any)
	if !ok {
		return v, false
	}
	changed := false
	for i, el := range list {
		nv, c := redactPath(el, path[1:], with)
		if c {
			list[i], changed = nv, true
		}
	}
	return v, changed
}

// withhold replaces a tool's output secrets, declared (paths) and found
// by the detector, by their placeholders.
func withhold(key []byte, paths []string, d Detector, out json.RawMessage) json.RawMessage {
	return withholdDetected(key, d, redactOutput(key, paths, out))
}

// redactOutput replaces the output secrets of a tool's JSON output by
// their placeholders. Output that is not JSON is left to the guard's own
// checks; output with no secret present is returned as it is.
func redactOutput(key []byte, paths []string, out json.RawMessage) json.RawMessage {
	if len(paths) == 0 || len(out) == 0 {
		return out
	}
	_, tree, err := canon.Parse(out, canon.Limits{})
	if err != nil {
		return out
	}
	tree, changed := redactTree(tree, paths, func(v any) any {
		return SecretPlaceholder(secretHash(key, canon.AppendValue(nil, v)))
	})
	if !changed {
		return out
	}
	return canon.AppendValue(nil, tree)
}

// auditSecret is what the audit record keeps of an argument secret.
func auditSecret(key []byte, v any) any {
	return map[string]any{"hmac-sha256": secretHash(key, canon.AppendValue(nil, v))}
}

// Detector finds secrets a tool did not declare in the text of its output
// (Options.Detector): provider API keys, private keys, tokens, card
// numbers. Find returns the substrings of text to withhold; the guard
// replaces each, wherever it stands in a string of the output (or where a
// number is one), by its placeholder, as it does a declared secret. It must
// be safe for concurrent use.
type Detector interface {
	Find(text string) []string
}

// withholdDetected replaces what d finds in the strings and numbers of a
// tool's JSON output by placeholders. Output that is not JSON is left to
// the guard's own checks; output where nothing is found is returned as it
// is.
func withholdDetected(key []byte, d Detector, out json.RawMessage) json.RawMessage {
	if d == nil || len(out) == 0 {
		return out
	}
	_, tree, err := canon.Parse(out, canon.Limits{})
	if err != nil {
		return out
	}
	tree, changed := detectTree(key, d, tree)
	if !changed {
		return out
	}
	return canon.AppendValue(nil, tree)
}

func detectTree(key []byte, d Detector, v any) (any, bool) {
	switch t := v.(type) {
	case string:
		return detectString(key, d, t)
	case json.Number:
		if s, c := detectString(key, d, string(t)); c {
			return s, true
		}
	case map[string]any:
		changed := false
		for k, m := range t {
			if nv, c := detectTree(key, d, m); c {
				t[k], changed = nv, true
			}
		}
		return t, changed
	case []any:
		changed := false
		for i, m := range t {
			if nv, c := detectTree(key, d, m); c {
				t[i], changed = nv, true
			}
		}
		return t, changed
	}
	return v, false
}

func detectString(key []byte, d Detector, s string) (string, bool) {
	found := safeFind(d, s)
	if len(found) == 0 {
		return s, false
	}
	// Longest first, so that a secret inside another is not cut out of it.
	slices.SortFunc(found, func(a, b string) int { return len(b) - len(a) })
	changed := false
	for _, f := range found {
		if f == "" || !strings.Contains(s, f) {
			continue
		}
		s = strings.ReplaceAll(s, f, SecretPlaceholder(secretHash(key, canon.AppendString(nil, f))))
		changed = true
	}
	return s, changed
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
