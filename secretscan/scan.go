package secretscan

import (
	"regexp/syntax"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
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
// gitleaks. Each rule has a gitleaks detector of its own, which runs the
// rule on a window exactly as over a file: secret group, entropy,
// allowlists and stop words.

// maxWindowRun caps how far a window reaches through one run of non-space
// characters: a token longer than that is cut.
const maxWindowRun = 8 << 10

// rule is one gitleaks rule and how Find runs it.
type rule struct {
	det   *detect.Detector // the rule alone, with the global allowlists
	width int              // the greatest width of its bounded parts, in bytes
	runs  int              // its unbounded repeats (of non-space characters)
	whole bool             // it runs over the whole text
	// token: a match is one run of non-space characters, with at most a
	// space-taking character or two at either end (most rules: a key
	// and the quote or space that closes it); its window is that run.
	token bool
}

// newRule makes the detector of one rule.
func newRule(r config.Rule, global []*config.Allowlist) *rule {
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
	out := &rule{det: det, whole: len(r.Keywords) == 0}
	if !out.whole {
		re, err := syntax.Parse(r.Regex.String(), syntax.Perl)
		if err != nil {
			out.whole = true
		} else {
			w, runs, spaces := measure(re)
			out.width, out.runs, out.whole = w, runs, spaces
			out.token = isToken(re)
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

// isToken reports whether no part of re takes a space but one at its
// start or its end of at most 2 bytes.
func isToken(re *syntax.Regexp) bool {
	if re.Op != syntax.OpConcat {
		return !takesSpace(re)
	}
	for i, sub := range re.Sub {
		if !takesSpace(sub) {
			continue
		}
		w, runs, _ := measure(sub)
		if (i != 0 && i != len(re.Sub)-1) || runs > 0 || w > 2 {
			return false
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

// around returns the window of r around a keyword at text[at:at+n].
func (r *rule) around(text string, at, n int) window {
	start, end := at, at+n
	if r.token {
		for i := 0; i < maxWindowRun && start > 0 && !isSpace(text[start-1]); i++ {
			start--
		}
		for i := 0; i < maxWindowRun && end < len(text) && !isSpace(text[end]); i++ {
			end++
		}
		// and the space on either side (or two bytes, as in `\n`).
		return window{max(0, start-2), min(len(text), end+2)}
	}
	for range r.runs + 1 {
		start = max(0, start-r.width)
		end = min(len(text), end+r.width)
		for i := 0; i < maxWindowRun && start > 0 && !isSpace(text[start-1]); i++ {
			start--
		}
		for i := 0; i < maxWindowRun && end < len(text) && !isSpace(text[end]); i++ {
			end++
		}
	}
	return window{start, end}
}

// lowerASCII lowers the ASCII letters of text, keeping every offset (the
// keywords are ASCII).
func lowerASCII(text string) []byte {
	b := []byte(text)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// keywordIndex finds the rules' keywords.
type keywordIndex struct {
	trie  *ahocorasick.Trie
	rules [][]int // by keyword: the windowed rules it belongs to
	lens  []int   // by keyword: its length
}

func newKeywordIndex(rules []*rule, keywords [][]string) keywordIndex {
	var ix keywordIndex
	pos := map[string]int{}
	b := ahocorasick.NewTrieBuilder()
	for i := range rules {
		for _, k := range keywords[i] {
			p, ok := pos[k]
			if !ok {
				p = len(ix.rules)
				pos[k] = p
				ix.rules = append(ix.rules, nil)
				ix.lens = append(ix.lens, len(k))
				b.AddString(k)
			}
			ix.rules[p] = append(ix.rules[p], i)
		}
	}
	ix.trie = b.Build()
	return ix
}

// closePunct returns win with the punctuation that ends a sentence or a
// clause ('.', ',', ':', '!', '?', ')', ']', '}', '>') made a space where
// a space or the end follows it. gitleaks' rules end a key at a quote, a
// space, ';' or the end of the text, as in code and config files; in the
// prose of a tool's output, "the key is sk-….", a key is as often closed
// by a full stop or a comma. The window keeps its length, so a secret
// found in it is still one of text's substrings (Find checks).
func closePunct(win string) string {
	var b []byte
	for i := 0; i < len(win); i++ {
		switch win[i] {
		case '.', ',', ':', '!', '?', ')', ']', '}', '>':
			if i+1 == len(win) || isSpace(win[i+1]) {
				if b == nil {
					b = []byte(win)
				}
				b[i] = ' '
			}
		}
	}
	if b == nil {
		return win
	}
	return string(b)
}
