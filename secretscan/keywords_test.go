package secretscan

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
)

// TestAutomaton: the automaton finds what gitleaks' Aho–Corasick
// (BobuSumisu/aho-corasick, over the lower-cased text) finds, every
// keyword at every place, overlapping ones included, over the default
// keywords and texts that hold them in mixed case, glued together and
// amid random bytes.
func TestAutomaton(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var keywords []string
	for i := range d.ac.lens {
		keywords = append(keywords, d.keyword(i))
	}
	ref := ahocorasick.NewTrieBuilder().AddStrings(keywords).Build()
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		var b strings.Builder
		for range r.IntN(12) {
			switch r.IntN(3) {
			case 0:
				k := []byte(keywords[r.IntN(len(keywords))])
				for i := range k {
					if r.IntN(2) == 0 && 'a' <= k[i] && k[i] <= 'z' {
						k[i] -= 'a' - 'A'
					}
				}
				b.Write(k)
			case 1:
				b.WriteString(keywords[r.IntN(len(keywords))][:1])
			default:
				for range r.IntN(8) {
					b.WriteByte(byte(r.IntN(256)))
				}
			}
		}
		text := b.String()
		if n == 0 {
			text = "sk-proj-sk-ant-api03-ghp_AKIAxoxb-://token=Bearer"
		}
		var want []hit
		ref.Walk(lowerASCII(text), func(end, length, pattern int64) bool {
			want = append(want, hit{int32(pattern), int32(end - length + 1)})
			return true
		})
		got := d.ac.walk(text, nil)
		sortHits(got)
		sortHits(want)
		if !slices.Equal(got, want) {
			t.Fatalf("walk(%q):\n got %v\nwant %v", text, got, want)
		}
	}
}

func sortHits(h []hit) {
	slices.SortFunc(h, func(a, b hit) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.keyword - b.keyword)
	})
}

// lowerASCII lowers the ASCII letters of text, keeping every offset.
func lowerASCII(text string) []byte {
	b := []byte(text)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}
