package secretscan_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/secretcorpus"
	"github.com/toolguard/toolguard/secretscan"
)

// withheld is what the corpus tests put where Find's results were: not a
// hex placeholder, whose digits a card's could be mistaken for.
const withheld = "[withheld]"

// replaceFound replaces what Find found in text as the guard does
// (guard.withholdDetected): the longest first, every occurrence.
func replaceFound(text string, found []string) string {
	found = slices.Clone(found)
	slices.SortFunc(found, func(a, b string) int { return len(b) - len(a) })
	for _, f := range found {
		if f != "" {
			text = strings.ReplaceAll(text, f, withheld)
		}
	}
	return text
}

// TestCorpus: every case of the shared corpus (internal/secretcorpus: each
// secret shape in each of the twelve contexts): Find returns
// substrings of the text, and once they are replaced as the guard replaces
// them, no 12 characters in a row of any form of the secret (raw,
// escaped, encoded, or the base64 that holds it) are left (Case.Leak).
// A miss prints the shape × context table.
func TestCorpus(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	cases := secretcorpus.Cases()
	leaks := map[string]map[secretcorpus.Context]bool{}
	for _, c := range cases {
		found := d.Find(c.Text)
		for _, f := range found {
			if !strings.Contains(c.Text, f) {
				t.Errorf("%s/%s: Find returned %q, not a substring", c.Shape, c.Context, f)
			}
		}
		redacted := replaceFound(c.Text, found)
		if p, ok := c.Leak(redacted); ok {
			t.Errorf("%s/%s: %q left in %q (found %q)", c.Shape, c.Context, p, redacted, found)
			if leaks[c.Shape] == nil {
				leaks[c.Shape] = map[secretcorpus.Context]bool{}
			}
			leaks[c.Shape][c.Context] = true
		}
	}
	n := 0
	for _, m := range leaks {
		n += len(m)
	}
	t.Logf("%d shapes × %d contexts = %d cases: %d leak", len(secretcorpus.Shapes()), len(secretcorpus.Contexts()), len(cases), n)
	if n > 0 {
		t.Logf("leaks (x) by shape × context:\n%s", table(leaks))
	}
}

// table draws leaks as a shape × context grid.
func table(leaks map[string]map[secretcorpus.Context]bool) string {
	var b strings.Builder
	ctxs := secretcorpus.Contexts()
	fmt.Fprintf(&b, "%-26s", "")
	for i := range ctxs {
		fmt.Fprintf(&b, " %2d", i+1)
	}
	b.WriteString("\n")
	for _, s := range secretcorpus.Shapes() {
		fmt.Fprintf(&b, "%-26s", s)
		for _, c := range ctxs {
			mark := "."
			if leaks[s][c] {
				mark = "x"
			}
			fmt.Fprintf(&b, "  %s", mark)
		}
		b.WriteString("\n")
	}
	for i, c := range ctxs {
		fmt.Fprintf(&b, "%d=%s ", i+1, c)
	}
	return b.String()
}

// TestLookAlikes: of the corpus's look-alikes (UUIDs, hashes, git SHAs,
// IMEIs, tracking numbers, ids that pass Luhn, base64 of prose,
// timestamps, …), at most 0.1 % are flagged.
func TestLookAlikes(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	la := secretcorpus.LookAlikes()
	flagged := 0
	for _, l := range la {
		if got := d.Find(l.Text); len(got) > 0 {
			flagged++
			t.Logf("flagged %s %q: %q", l.Kind, l.Text, got)
		}
	}
	t.Logf("%d of %d look-alikes flagged (%.2f %%)", flagged, len(la), 100*float64(flagged)/float64(len(la)))
	if flagged*1000 > len(la) {
		t.Errorf("%d of %d look-alikes flagged: more than 0.1 %%", flagged, len(la))
	}
}

// TestFindOverJSON: the one-pass use of Find (docs/secrets.md, "One pass
// over an output"). Each case put in a tool's JSON output, as a member's
// value or as a key, and the output's whole JSON text given to Find: it
// finds something; and an output's strings, each with what Find finds in
// it and what it found in the JSON text (as found, and JSON-unescaped)
// replaced, leak nothing. Look-alikes in an output: at most 0.1 % of
// outputs flagged.
func TestFindOverJSON(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	for _, c := range secretcorpus.Cases() {
		var out any = map[string]any{"data": map[string]any{"note": c.Text, "id": 7}}
		if c.Where == secretcorpus.AsMapKey {
			out = map[string]any{"data": map[string]any{c.Text: 7}}
		}
		raw, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		found := d.Find(string(raw))
		if len(found) == 0 {
			t.Errorf("%s/%s: nothing found in %s", c.Shape, c.Context, raw)
			continue
		}
		for _, f := range found {
			var s string
			if json.Unmarshal([]byte(`"`+f+`"`), &s) == nil {
				found = append(found, s)
			}
		}
		redacted, err := json.Marshal(withholdTree(d, out, found))
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := c.Leak(string(redacted)); ok {
			t.Errorf("%s/%s: %q left in %s", c.Shape, c.Context, p, redacted)
		}
	}
	flagged := 0
	la := secretcorpus.LookAlikes()
	for _, l := range la {
		raw, _ := json.Marshal(map[string]any{"data": map[string]any{"note": l.Text, l.Text: 1}})
		if got := d.Find(string(raw)); len(got) > 0 {
			flagged++
			t.Logf("flagged %s in %s: %q", l.Kind, raw, got)
		}
	}
	t.Logf("look-alikes in JSON: %d of %d outputs flagged", flagged, len(la))
	if flagged*1000 > len(la) {
		t.Errorf("%d of %d flagged: more than 0.1 %%", flagged, len(la))
	}
	// All of them side by side in one output, members "0" to "1224": a card
	// word of one member says nothing of its neighbour's number.
	all := map[string]any{}
	for i, l := range la {
		all[fmt.Sprint(i)] = l.Text
	}
	raw, _ := json.Marshal(all)
	got := d.Find(string(raw))
	t.Logf("look-alikes in one output: %d of %d flagged", len(got), len(la))
	if len(got)*1000 > len(la) {
		t.Errorf("%d of %d look-alikes in one output flagged: more than 0.1 %%: %q", len(got), len(la), got)
	}
}

// withholdTree replaces, in every string and key of v, what d finds in it
// and also.
func withholdTree(d *secretscan.Detector, v any, also []string) any {
	switch t := v.(type) {
	case string:
		return replaceFound(t, append(d.Find(t), also...))
	case map[string]any:
		m := map[string]any{}
		for k, x := range t {
			m[replaceFound(k, append(d.Find(k), also...))] = withholdTree(d, x, also)
		}
		return m
	case []any:
		for i := range t {
			t[i] = withholdTree(d, t[i], also)
		}
	}
	return v
}
