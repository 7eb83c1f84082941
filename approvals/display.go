package approvals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field is one top-level member of a request's arguments as an approver
// sees it: its canonical JSON value when the tool marks the member safe to
// show (toolset's LogArguments), else only its fingerprint.
type Field struct {
	Name string `json:"name"`
	// Description is what the tool's schema says the member is (what the
	// model was told), "" for none: the inbox labels the member with it.
	Description string `json:"description,omitempty"`
	// Value is the member's canonical JSON text, with what the queue's
	// Detector finds in it shown as placeholders; empty when hidden.
	Value json.RawMessage `json:"value,omitempty"`
	// Fingerprint is "sha256:" and the hex SHA-256 of the canonical JSON
	// value, set for every member, shown or not, but one that holds a
	// secret: its fingerprint would let a short secret be guessed.
	Fingerprint string `json:"fingerprint"`
	// Hidden says the tool does not mark the member safe to show.
	Hidden bool `json:"hidden,omitempty"`
	// Secret says the member is withheld as a secret: it is, or holds, a
	// secret the tool declared (guard.ToolSpec.SecretArguments), or it is
	// hidden and the Detector found one in it. Hidden, and without a
	// fingerprint.
	Secret bool `json:"secret,omitempty"`
}

// shownFields splits canonical JSON arguments into fields, showing only the
// members named in logged that hold no declared secret (secrets: guard's
// SecretArguments paths), with what the detector finds withheld.
// Arguments that are not an object are one hidden field named "".
func (s *Queue) shownFields(args []byte, logged, secrets []string) []Field {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(args, &members); err != nil {
		f := Field{Fingerprint: valueFingerprint(args), Hidden: true}
		if red := s.redactor.JSON(args); !bytes.Equal(red, args) {
			f.Fingerprint, f.Secret = "", true
		}
		return []Field{f}
	}
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Field, 0, len(names))
	for _, n := range names {
		v := members[n]
		f := Field{Name: n, Fingerprint: valueFingerprint(v)}
		red := s.redactor.JSON(v)
		found := !bytes.Equal(red, v)
		switch {
		case holdsSecret(n, secrets):
			f.Fingerprint, f.Hidden, f.Secret = "", true, true
		case slices.Contains(logged, n):
			f.Value = red
			if found {
				f.Fingerprint = ""
			}
		default:
			f.Hidden = true
			if found {
				f.Fingerprint, f.Secret = "", true
			}
		}
		out = append(out, f)
	}
	return out
}

// holdsSecret reports whether the top-level member name is, or holds, one
// of the secrets paths name.
func holdsSecret(name string, secrets []string) bool {
	for _, p := range secrets {
		if p == name || strings.HasPrefix(p, name+".") || strings.HasPrefix(p, name+"[]") {
			return true
		}
	}
	return false
}

func valueFingerprint(v []byte) string {
	sum := sha256.Sum256(v)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// maxShownRunes bounds how much of one value the inbox page prints; the
// JSON API gives it whole.
const maxShownRunes = 2000

// segment is a run of a value's text as the page prints it: plain text, or
// one invisible or direction-changing character named by its code point.
type segment struct {
	Text      string
	Invisible bool
}

// shownValue is a field's value prepared for the page.
type shownValue struct {
	Segments []segment
	// Quoted says the value is a JSON string, printed without its quotes.
	Quoted bool
	// Invisible counts the characters shown by code point.
	Invisible int
	// Omitted counts the characters not printed (long values).
	Omitted int
}

// showValue renders a canonical JSON value for a human: strings without
// their JSON quoting, every control, format (zero-width, bidirectional
// override) or other invisible character named as U+XXXX so that what the
// approver reads is what the tool gets, and at most maxShownRunes
// characters.
func showValue(v json.RawMessage) shownValue {
	text := string(v)
	var out shownValue
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		text, out.Quoted = s, true
	}
	var plain bytes.Buffer
	flush := func() {
		if plain.Len() > 0 {
			out.Segments = append(out.Segments, segment{Text: plain.String()})
			plain.Reset()
		}
	}
	n := 0
	for i, r := range text {
		if n == maxShownRunes {
			out.Omitted = utf8.RuneCountInString(text[i:])
			break
		}
		n++
		if invisible(r) {
			flush()
			out.Segments = append(out.Segments, segment{Text: fmt.Sprintf("U+%04X", r), Invisible: true})
			out.Invisible++
			continue
		}
		plain.WriteRune(r)
	}
	flush()
	return out
}

// invisible reports whether r would not show as itself: controls, format
// characters (zero-width joiners, bidirectional overrides and isolates, the
// byte order mark), unassigned and private-use code points, and spaces
// other than the ASCII space.
func invisible(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r),
		unicode.IsSpace(r), !unicode.IsPrint(r) && !unicode.IsGraphic(r):
		return true
	}
	return false
}
