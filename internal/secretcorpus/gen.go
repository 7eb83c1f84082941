package secretcorpus

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
)

// Alphabets of the fake values.
const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	urlsafe = alnum + "_-"
	b64std  = alnum + "+/"
	upper32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	digits  = "0123456789"
	hexlow  = "0123456789abcdef"
	lower   = "abcdefghijklmnopqrstuvwxyz"
)

// gen draws the corpus's values from a seeded generator: the same seed, the
// same corpus.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, 0x5ec7e75))} }

// str returns n characters drawn from alphabet.
func (g *gen) str(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

// mixed returns n characters of alphabet with at least one upper-case
// letter, one lower-case letter and one digit, as a real key has.
func (g *gen) mixed(alphabet string, n int) string {
	for {
		s := g.str(alphabet, n)
		var u, l, d bool
		for _, c := range s {
			u = u || ('A' <= c && c <= 'Z')
			l = l || ('a' <= c && c <= 'z')
			d = d || ('0' <= c && c <= '9')
		}
		if u && l && d {
			return s
		}
	}
}

func (g *gen) intn(n int) int { return g.r.IntN(n) }

// pick returns one of xs.
func pick[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// luhnDigit returns the check digit that makes digits+it pass Luhn.
func luhnDigit(digits string) byte {
	sum := 0
	double := true // the check digit will be the rightmost, undoubled
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return byte('0' + (10-sum%10)%10)
}

// luhnNumber returns a number of n digits that starts with prefix and
// passes Luhn.
func (g *gen) luhnNumber(prefix string, n int) string {
	body := prefix + g.str(digits, n-len(prefix)-1)
	return body + string(luhnDigit(body))
}

// nonLuhnNumber returns a number of n digits that starts with prefix and
// fails Luhn.
func (g *gen) nonLuhnNumber(prefix string, n int) string {
	body := prefix + g.str(digits, n-len(prefix)-1)
	ok := luhnDigit(body)
	return body + string('0'+(ok-'0'+1+byte(g.intn(9)))%10)
}

// group writes digits in groups of the given sizes, and the rest in one
// more, joined by sep.
func group(digits string, sep string, sizes ...int) string {
	var parts []string
	for _, n := range sizes {
		parts = append(parts, digits[:n])
		digits = digits[n:]
	}
	if digits != "" {
		parts = append(parts, digits)
	}
	return strings.Join(parts, sep)
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
