package secretscan

import "strings"

// automaton finds every occurrence of a set of keywords in a text, ASCII
// case ignored, overlapping ones included, in one pass of one table
// look-up per byte: an Aho–Corasick automaton compiled to a DFA over byte
// classes, with upper-case ASCII letters in their lower-case letter's
// class. gitleaks' own (BobuSumisu/aho-corasick) follows failure links
// byte by byte and needs a lower-cased copy of the text; this one walks
// the text as it is, allocates nothing, and its pass also classifies each
// byte for the decoders and the card finder (Find's scan). Its hits are
// checked against BobuSumisu's over the same keywords (TestAutomaton).
type automaton struct {
	class   [256]uint8 // byte → class
	classes int
	// delta[row+class] is the next state's row (state*classes), or its
	// complement (^row, negative) where keywords end in that state: one
	// load and one sign test a byte.
	delta []int32
	out   [][]int32 // state → the keywords that end there, by index
	lens  []int     // keyword → its length
}

// newAutomaton compiles keywords, which are lower-case.
func newAutomaton(keywords []string) *automaton {
	a := &automaton{lens: make([]int, len(keywords))}
	// Byte classes: one per byte a keyword holds (a letter and its upper
	// case together), and class 0 for every other byte.
	for _, k := range keywords {
		for i := 0; i < len(k); i++ {
			c := k[i]
			if a.class[c] == 0 {
				a.classes++
				a.class[c] = uint8(a.classes)
				if 'a' <= c && c <= 'z' {
					a.class[c-'a'+'A'] = a.class[c]
				}
			}
		}
	}
	a.classes++
	// The trie.
	type node struct {
		next map[uint8]int32
		out  []int32
	}
	nodes := []node{{next: map[uint8]int32{}}}
	for ki, k := range keywords {
		a.lens[ki] = len(k)
		s := int32(0)
		for i := 0; i < len(k); i++ {
			c := a.class[k[i]]
			n, ok := nodes[s].next[c]
			if !ok {
				n = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint8]int32{}})
				nodes[s].next[c] = n
			}
			s = n
		}
		nodes[s].out = append(nodes[s].out, int32(ki))
	}
	// Breadth first: failure links, the outputs they bring, and the DFA's
	// transitions (a missing edge takes the failure state's).
	a.delta = make([]int32, len(nodes)*a.classes)
	a.out = make([][]int32, len(nodes))
	fail := make([]int32, len(nodes))
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		a.out[s] = append(nodes[s].out, a.out[fail[s]]...)
		if s == 0 {
			a.out[s] = nodes[s].out
		}
		for c := range a.classes {
			n, ok := nodes[s].next[uint8(c)]
			switch {
			case ok:
				if s != 0 {
					fail[n] = a.delta[int(fail[s])*a.classes+c]
				}
				a.delta[int(s)*a.classes+c] = n
				queue = append(queue, n)
			case s != 0:
				a.delta[int(s)*a.classes+c] = a.delta[int(fail[s])*a.classes+c]
			}
		}
	}
	for i, n := range a.delta {
		if len(a.out[n]) > 0 {
			a.delta[i] = ^(n * int32(a.classes))
		} else {
			a.delta[i] = n * int32(a.classes)
		}
	}
	return a
}

// next returns the row after row on byte c, and the keywords that end
// there.
func (a *automaton) next(row int32, c byte) (int32, []int32) {
	v := a.delta[int(row)+int(a.class[c])]
	if v >= 0 {
		return v, nil
	}
	return ^v, a.out[int(^v)/a.classes]
}

// hit is a keyword found at text[at:at+len].
type hit struct {
	keyword int32
	at      int32
}

// walk appends the keywords of text to hits, in the order they end.
func (a *automaton) walk(text string, hits []hit) []hit {
	var row int32
	var out []int32
	for i := 0; i < len(text); i++ {
		row, out = a.next(row, text[i])
		for _, k := range out {
			hits = append(hits, hit{k, int32(i + 1 - a.lens[k])})
		}
	}
	return hits
}

// lowerKeywords returns keywords lower-cased, each once, in order.
func lowerKeywords(keywords []string) []string {
	out := make([]string, 0, len(keywords))
	seen := map[string]bool{}
	for _, k := range keywords {
		k = strings.ToLower(k)
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
