package secretscan

import (
	"slices"
	"strings"
	"sync"
)

// span is text[start:end].
type span struct{ start, end int }

// pass is what one scan of a text found, and the scratch space of its
// rules; passes are reused, so that a text where nothing is found costs
// no allocation.
type pass struct {
	hits    []hit     // keywords, in the order they end
	b64     []span    // runs of base64 long enough to decode
	wins    []ruleWin // the rules' windows
	last    []window  // by rule: its last window in this text, or {-1, -1}
	rules   []int32   // the rules whose last window is set
	words   []span    // card words
	numbers []span    // runs of 13 digits or more, in groups joined by ' ' or '-'
	esc     bool      // a JSON string escape
	pct     bool      // a %XX
}

// ruleWin is a window of text a gitleaks rule runs on.
type ruleWin struct {
	rule       int32
	start, end int32
}

var passes = sync.Pool{New: func() any { return new(pass) }}

func getPass() *pass {
	p := passes.Get().(*pass)
	p.hits, p.b64, p.wins, p.words = p.hits[:0], p.b64[:0], p.wins[:0], p.words[:0]
	p.numbers, p.esc, p.pct = p.numbers[:0], false, false
	return p
}

// byte classes of the scan.
const (
	bB64   = 1 << iota // a character of either base64 alphabet
	bDigit             // 0-9
	bMark              // '\\' or '%': look at what follows
)

var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		b := byte(c)
		if isB64Word(b) {
			t[c] |= bB64
		}
		if isDigit(b) {
			t[c] |= bDigit
		}
		if b == '\\' || b == '%' {
			t[c] |= bMark
		}
	}
	return t
}()

// scan is Find's one pass over text: the keywords (the automaton), the
// runs of base64, the digits, and whether text holds an escape or a %XX.
func (d *Detector) scan(text string, p *pass) {
	a := d.ac
	var row int32
	run := 0 // where the current run of base64 started
	// The current number: digits, and single separators between them.
	numStart, numDigits, lastDigit := 0, 0, -2
	endNumber := func() {
		if numDigits >= minCardDigits {
			p.numbers = append(p.numbers, span{numStart, lastDigit + 1})
		}
		numDigits = 0
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if v := a.delta[int(row)+int(a.class[c])]; v >= 0 {
			row = v
		} else {
			row = ^v
			for _, k := range a.out[int(row)/a.classes] {
				p.hits = append(p.hits, hit{k, int32(i + 1 - a.lens[k])})
			}
		}
		cl := byteClass[c]
		switch {
		case cl&bDigit != 0:
			if numDigits == 0 {
				numStart = i
			}
			numDigits++
			lastDigit = i
		case (c == ' ' || c == '-') && lastDigit == i-1:
			// a separator: the number goes on if a digit follows
		case numDigits > 0:
			endNumber()
		}
		if cl&bB64 != 0 {
			continue
		}
		if i-run >= minBase64 {
			end := i
			for end < len(text) && end-i < 2 && text[end] == '=' {
				end++
			}
			p.b64 = append(p.b64, span{run, end})
		}
		run = i + 1
		if cl&bMark != 0 && i+1 < len(text) {
			if c == '\\' {
				p.esc = p.esc || strings.IndexByte(`"\/bfnrtu`, text[i+1]) >= 0
			} else {
				p.pct = p.pct || (i+2 < len(text) && unhex(text[i+1]) >= 0 && unhex(text[i+2]) >= 0)
			}
		}
	}
	if len(text)-run >= minBase64 {
		p.b64 = append(p.b64, span{run, len(text)})
	}
	endNumber()
	p.b64 = joinWrapped(text, p.b64)
	// A form's '+' is a space: "Bearer+…", "4111+1111+…" in a query.
	p.pct = p.pct || formPlus(text)
}

// joinWrapped joins the runs of base64 that are the lines of one wrapped
// body (a PEM body, a MIME part): lines of one width of at least
// minWrapped, broken by \n or \r\n, and a last line no longer.
func joinWrapped(text string, runs []span) []span {
	out := runs[:0]
	for i := 0; i < len(runs); i++ {
		r := runs[i]
		width := r.end - r.start
		for width >= minWrapped {
			next := r.end
			if next < len(text) && text[next] == '\r' {
				next++
			}
			if next >= len(text) || text[next] != '\n' {
				break
			}
			next++
			end := next
			for end < len(text) && isB64Word(text[end]) {
				end++
			}
			for end < len(text) && end-next < width && text[end] == '=' {
				end++
			}
			if end == next || end-next > width {
				break
			}
			r.end = end
			if i+1 < len(runs) && runs[i+1].start == next {
				i++ // that line was a run of its own
			}
			if end-next < width || text[end-1] == '=' {
				break // the last line
			}
		}
		out = append(out, r)
	}
	return out
}

// formPlus reports whether text holds a URL query ('?' then '=') with a
// '+' between two letters or digits in it: a space as a form encodes it.
func formPlus(text string) bool {
	q := strings.IndexByte(text, '?')
	if q < 0 || strings.IndexByte(text[q:], '=') < 0 {
		return false
	}
	for i := q + 1; i+1 < len(text); i++ {
		if text[i] == '+' && isAlnum(text[i-1]) && isAlnum(text[i+1]) {
			return true
		}
	}
	return false
}

// Find returns the secrets in text, each once, as substrings of text as
// they stand there: what a rule matched (its secret group where it has
// one), a card number with its separators, a password or a token, or,
// where the secret is encoded, its encoded form (percent-encoded,
// escaped, or the whole base64 run that holds it). The substrings do not
// overlap. It never panics on any input, and allocates nothing where it
// finds nothing in text that holds no keyword and nothing to decode.
func (d *Detector) Find(text string) []string {
	if len(text) < minCardDigits {
		return nil
	}
	budget := decodeBudget(len(text))
	spans := d.find(text, 0, &budget, nil)
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out []string
	cur := spans[0]
	flush := func() {
		if s := text[cur.start:cur.end]; s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range spans[1:] {
		if s.start < cur.end {
			cur.end = max(cur.end, s.end)
			continue
		}
		flush()
		cur = s
	}
	flush()
	return out
}

// find appends the secrets of text, at depth layers of decoding, to out;
// budget is what may still be decoded, in bytes.
func (d *Detector) find(text string, depth int, budget *int, out []span) []span {
	p := getPass()
	defer passes.Put(p)
	for len(p.last) < len(d.rules) {
		p.last = append(p.last, window{-1, -1})
	}
	defer func() {
		for _, ri := range p.rules {
			p.last[ri] = window{-1, -1}
		}
		p.rules = p.rules[:0]
	}()
	d.scan(text, p)

	// The keywords: windows for gitleaks' rules, the own shapes at once.
	for _, h := range p.hits {
		at, n := int(h.at), d.ac.lens[h.keyword]
		for _, ri := range d.kwRules[h.keyword] {
			if w, ok := d.rules[ri].next(text, at, n, p.last[ri]); ok {
				if p.last[ri].start < 0 {
					p.rules = append(p.rules, ri)
				}
				p.last[ri] = w
				p.wins = append(p.wins, ruleWin{ri, int32(w.start), int32(w.end)})
			}
		}
		for _, o := range d.kwOwn[h.keyword] {
			if o == ownCard {
				if isCardWord(text, at, n) {
					p.words = append(p.words, span{at, at + n})
				}
				continue
			}
			out = findOwn(text, o, at, n, out)
		}
	}
	out = d.runRules(text, p.wins, out)
	for _, r := range d.keywordless {
		out = r.find(text, 0, out)
	}
	if d.cards {
		for _, n := range p.numbers {
			out = findCards(text, n.start, n.end, p.words, out)
		}
	}

	// The layers of decoding.
	if depth == maxDepth {
		return out
	}
	if p.esc && spend(budget, len(text)) {
		out = d.findIn(unescapeJSON(text), depth, budget, out)
	}
	if p.pct && spend(budget, len(text)) {
		out = d.findIn(unpercent(text), depth, budget, out)
	}
	for _, r := range p.b64 {
		if !spend(budget, r.end-r.start) {
			break
		}
		if dec, ok := unbase64(text[r.start:r.end]); ok && len(d.find(dec, depth+1, budget, nil)) > 0 {
			out = append(out, r) // the whole run: the guard withholds it
		}
	}
	return out
}

// spend takes n bytes from budget, if it has them.
func spend(budget *int, n int) bool {
	if *budget < n {
		return false
	}
	*budget -= n
	return true
}

// findIn appends what is found in a decoded layer, where it stands in the
// layer's parent.
func (d *Detector) findIn(l *layer, depth int, budget *int, out []span) []span {
	for _, s := range d.find(l.text, depth+1, budget, nil) {
		a, b := l.parent(s.start, s.end)
		out = append(out, span{a, b})
	}
	return out
}

// runRules runs each rule over its windows, merged where they overlap.
func (d *Detector) runRules(text string, wins []ruleWin, out []span) []span {
	if len(wins) == 0 {
		return out
	}
	slices.SortFunc(wins, func(a, b ruleWin) int {
		if a.rule != b.rule {
			return int(a.rule - b.rule)
		}
		return int(a.start - b.start)
	})
	cur := wins[0]
	for _, w := range wins[1:] {
		if w.rule == cur.rule && w.start <= cur.end {
			cur.end = max(cur.end, w.end)
			continue
		}
		out = d.rules[cur.rule].find(text[cur.start:cur.end], int(cur.start), out)
		cur = w
	}
	return d.rules[cur.rule].find(text[cur.start:cur.end], int(cur.start), out)
}

// find appends the secrets r finds in win, which starts at offset in the
// text, as spans of the text. The rule's expression is tried first: where
// it matches nothing, nothing more is done.
func (r *rule) find(win string, offset int, out []span) []span {
	if !r.re.MatchString(win) {
		return out
	}
	for _, f := range r.det.DetectString(win) {
		if f.Secret == "" {
			continue
		}
		for i := 0; ; {
			j := strings.Index(win[i:], f.Secret)
			if j < 0 {
				break
			}
			out = append(out, span{offset + i + j, offset + i + j + len(f.Secret)})
			i += j + len(f.Secret)
		}
	}
	return out
}
