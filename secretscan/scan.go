package secretscan

import (
	"regexp/syntax"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	glregexp "github.com/zricethezav/gitleaks/v8/regexp"
)

// Speed. gitleaks runs the regular expression of every rule whose keyword
// is anywhere in the text over the whole text, and Go's regexp (a linear
// NFA) costs 50 to 700 ns a byte per rule: prose that says "key", "they"
// or "next_page" wakes rules whose keyword is that common, and a 4 KB
// output took 7 ms. So a rule runs only over windows around its own
// keywords' occurrences (the keywords of gitleaks' rules are parts of
// what they match), wide enough for any match that holds the keyword:
// the rule's greatest bounded width on each side, and past every run of
// characters other than spaces that its unbounded repeats can take, to
// the next space. A window starts after a space and ends before one, so
// \b, $ and the rules' closing [\s'"] see what they see in the whole text.
// A rule with no keyword, or one whose unbounded repeats take spaces (a
// private key block, a YAML document), runs over the whole text as in
// gitleaks. A window where the rule's expression matches nothing costs
// that match and no more; where it matches, the rule's own gitleaks
// detector runs it on the window exactly as over a file: secret group,
// entropy, allowlists and stop words.
//
// Punctuation. Two thirds of gitleaks' rules end a key at a quote, a space,
// ';', an escaped line break or the end of the text, as in code and config
// files ((?:[\x60'"\s;]|\\[nr]|$)). In a tool's output a key is as often
// closed by '&' in a URL, '<' in XML, ',' in CSV or prose, '\"' in JSON in
// a string, ')' or a full stop: closeRegex widens that ending to all of
// those, so the same rule finds the key whatever closes it. (A key after
// "%3D", percent-encoded or escaped is found in the decoded text:
// decode.go.)

// maxWindowRun caps how far a window reaches through one run of non-space
// characters: a token longer than that is cut.
const maxWindowRun = 8 << 10

// rule is one gitleaks rule and how Find runs it.
type rule struct {
	re    *glregexp.Regexp // its expression, with closeRegex's ending
	det   *detect.Detector // the rule alone, with the global allowlists
	width int              // the greatest width of its bounded parts, in bytes
	runs  int              // its unbounded repeats (of non-space characters)
	whole bool             // it runs over the whole text
	// token: a match is one run of the bytes in inner (the bytes its
	// middle can match: no space), with at most two bytes of any kind at
	// either end (most rules: a key, and the quote, '=' or space that
	// opens or closes it); its window is that run and two bytes more on
	// each side. In JSON, a URL or a CSV row, that window is the key's
	// own run, not the whole line.
	token bool
	inner [256]bool
}

// gitleaksClose is how most of gitleaks' rules end a key, and
// closeRegex how secretscan's copies of them do.
const (
	gitleaksClose = `(?:[\x60'"\s;]|\\[nr]|$)`
	closeRegex    = `(?:[\x60'"\s;&<>,)\]}|\\%#]|[.:!?](?:\s|$)|$)`
)

// newRule makes the detector of one rule.
func newRule(r config.Rule, global []*config.Allowlist) *rule {
	if src := r.Regex.String(); strings.Contains(src, gitleaksClose) {
		r.Regex = glregexp.MustCompile(strings.ReplaceAll(src, gitleaksClose, closeRegex))
	}
	kw := map[string]struct{}{}
	for _, k := range r.Keywords {
		kw[k] = struct{}{}
	}
	det := detect.NewDetector(config.Config{
		Rules:        map[string]config.Rule{r.RuleID: r},
		Keywords:     kw,
		OrderedRules: []string{r.RuleID},
		Allowlists:   global,
	})
	det.MaxDecodeDepth = 0
	out := &rule{re: r.Regex, det: det, whole: len(r.Keywords) == 0}
	if !out.whole {
		re, err := syntax.Parse(r.Regex.String(), syntax.Perl)
		if err != nil {
			out.whole = true
		} else {
			w, runs, spaces := measure(re)
			out.width, out.runs, out.whole = w, runs, spaces
			out.token = tokenBytes(re, &out.inner)
		}
	}
	return out
}

// measure returns the greatest width in bytes of re's bounded parts, the
// number of its unbounded repeats, and whether one of those can take a
// space (then no window is safe).
func measure(re *syntax.Regexp) (width, runs int, spaces bool) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			width += runeWidth(r)
		}
		return width, 0, false
	case syntax.OpCharClass:
		w := 1
		for i := 0; i+1 < len(re.Rune); i += 2 {
			w = max(w, runeWidth(re.Rune[i+1]))
		}
		return w, 0, false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 4, 0, false
	case syntax.OpCapture:
		return measure(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		for _, s := range re.Sub {
			w, r, sp := measure(s)
			if re.Op == syntax.OpConcat {
				width += w
				runs += r
			} else {
				width, runs = max(width, w), max(runs, r)
			}
			spaces = spaces || sp
		}
		return width, runs, spaces
	case syntax.OpQuest:
		return measure(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return unbounded(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return unbounded(re.Sub[0])
		}
		w, r, sp := measure(re.Sub[0])
		return w * re.Max, r * re.Max, sp
	}
	return 0, 0, false // empty, anchors, word boundaries
}

// tokenBytes reports whether re's matches are tokens (see rule.token),
// and sets inner to the bytes their middle can hold.
func tokenBytes(re *syntax.Regexp, inner *[256]bool) bool {
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	for i, sub := range subs {
		if len(subs) > 1 && (i == 0 || i == len(subs)-1) {
			if w, runs, _ := measure(sub); runs == 0 && w <= 2 {
				continue // an edge: the window's two bytes more
			}
		}
		if !byteSet(sub, inner) {
			return false
		}
	}
	for _, c := range []byte(" \t\r\n\f\v") {
		if inner[c] {
			return false
		}
	}
	return true
}

// byteSet adds the bytes re can match to set, or reports false where it
// cannot tell.
func byteSet(re *syntax.Regexp, set *[256]bool) bool {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return false
	}
	high := func() {
		for b := 0x80; b < 0x100; b++ {
			set[b] = true
		}
	}
	for _, in := range prog.Inst {
		switch in.Op {
		case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			for b := range 0x100 {
				set[b] = true
			}
		case syntax.InstRune, syntax.InstRune1:
			for b := range 0x80 {
				if in.MatchRune(rune(b)) {
					set[b] = true
				}
			}
			for k := 1; k < len(in.Rune); k += 2 {
				if in.Rune[k] >= 0x80 || len(in.Rune) == 1 && in.Rune[0] >= 0x80 {
					high()
				}
			}
			if len(in.Rune) == 1 && in.Rune[0] >= 0x80 {
				high()
			}
		}
	}
	return true
}

// unbounded measures a repeat without bound of sub.
func unbounded(sub *syntax.Regexp) (width, runs int, spaces bool) {
	w, r, sp := measure(sub)
	_ = w
	return 0, r + 1, sp || takesSpace(sub)
}

// takesSpace reports whether re can match a space, a tab or a line break.
func takesSpace(re *syntax.Regexp) bool {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return true
	}
	for _, in := range prog.Inst {
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			for _, c := range " \t\r\n\f\v" {
				if in.MatchRune(c) {
					return true
				}
			}
		}
	}
	return false
}

func runeWidth(r rune) int {
	switch {
	case r < 0x80:
		return 1
	case r < 0x800:
		return 2
	case r < 0x10000:
		return 3
	}
	return 4
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// window is text[start:end].
type window struct{ start, end int }

// next returns the window of r around a keyword at text[at:at+n], given
// r's last window in the text (start -1: none), or false where the last
// window holds it already. Hits come in order, so a window need not scan
// again what the last one did: a text that repeats a keyword costs a pass
// over it, not one per repeat.
func (r *rule) next(text string, at, n int, last window) (window, bool) {
	switch {
	case last.start < 0:
		last = window{0, 0}
	case r.whole:
		return window{}, false
	case r.token && at >= last.start+2 && at+n <= last.end-2:
		return window{}, false // in the same run
	}
	if r.whole {
		return window{0, len(text)}, true
	}
	return r.around(text, at, n, last.start, last.end), true
}

// around returns the window of r around a keyword at text[at:at+n]; it
// reaches no further left than lo and, unless it starts at or after hi,
// at least to hi (the last window's bounds: the two are merged).
func (r *rule) around(text string, at, n, lo, hi int) window {
	start, end := at, at+n
	if start < hi {
		end = max(end, hi)
	}
	if r.token {
		for i := 0; i < maxWindowRun && start > lo && r.inner[text[start-1]]; i++ {
			start--
		}
		for i := 0; i < maxWindowRun && end < len(text) && r.inner[text[end]]; i++ {
			end++
		}
		// and the two bytes on either side (a quote, `\n`).
		return window{max(0, start-2), min(len(text), end+2)}
	}
	for range r.runs + 1 {
		start = max(lo, start-r.width)
		end = min(len(text), end+r.width)
		for i := 0; i < maxWindowRun && start > lo && !isSpace(text[start-1]); i++ {
			start--
		}
		for i := 0; i < maxWindowRun && end < len(text) && !isSpace(text[end]); i++ {
			end++
		}
	}
	return window{start, end}
}
