package secretscan

// Card numbers. A number is taken for a payment card's when all of these
// hold:
//
//   - 13 to 19 digits, in one run or in groups of at most 6 digits joined
//     by one kind of separator (a single space or a single dash), standing
//     on its own (not part of a word, an id or a decimal number); a
//     grouped number is a card only whole, or less a first or a last group
//     of 1 to 3 digits ("ref 12 4111 1111 1111 1111"): four groups of a
//     longer number (a parcel's 9205 8224 4686 1260 1924 36) are not one;
//   - its first digits are in the IIN range of a card scheme, and its
//     length is one of that scheme's (schemes: Visa 4, 13/16/19;
//     Mastercard 51–55 and 2221–2720, 16; Amex 34/37, 15; Discover, JCB,
//     Diners, UnionPay, Maestro, Mir, RuPay);
//   - its Luhn check digit is valid;
//   - it is written as a card is: in a card's grouping (4-4-4-4, 4-4-4-4-3,
//     4-4-4-1, Amex's 4-6-5, Diners' 4-6-4), or with a card word
//     (cardWords: card, pan, cc, visa, amex, …, as a word of its own or of
//     a name such as card_number or cardNumber) at most cardBefore bytes
//     before it or cardAfter bytes after it, and in JSON in the same
//     member ({"card_number":"4111…"}, not {"card_brand":"visa",
//     "customer_id":5105…}).
//
// So an IMEI (15 digits, 35… or 86…: no scheme of that length), a
// millisecond timestamp (13 digits, 1…), a parcel's tracking number, an
// EAN, or an internal id that passes Luhn and starts like a card but
// stands with no card word and in no card's grouping are left.

const (
	minCardDigits = 13
	maxCardDigits = 19
	cardBefore    = 64
	cardAfter     = 32
)

// cardWords are the words that make a number nearby a card's.
var cardWords = []string{
	"card", "cards", "pan", "cc", "ccn", "ccnum", "visa", "mastercard", "master card", "amex",
	"american express", "discover", "jcb", "diners", "unionpay", "union pay", "maestro", "rupay",
	"credit", "debit", "cvv", "cvc",
}

// scheme is an IIN range: numbers whose first `digits` digits are in
// [lo, hi], of the lengths in the bit set lengths.
type scheme struct {
	digits, lo, hi int
	lengths        uint32
}

func lengths(ns ...int) (set uint32) {
	for _, n := range ns {
		set |= 1 << n
	}
	return set
}

var (
	len16to19 = lengths(16, 17, 18, 19)
	schemes   = []scheme{
		{1, 4, 4, lengths(13, 16, 19)},             // Visa
		{2, 51, 55, lengths(16)},                   // Mastercard
		{4, 2221, 2720, lengths(16)},               // Mastercard 2-series
		{2, 34, 34, lengths(15)},                   // Amex
		{2, 37, 37, lengths(15)},                   // Amex
		{4, 6011, 6011, len16to19},                 // Discover
		{3, 644, 649, len16to19},                   // Discover
		{2, 65, 65, len16to19},                     // Discover, RuPay
		{6, 622126, 622925, len16to19},             // Discover (UnionPay co-branded)
		{4, 3528, 3589, len16to19},                 // JCB
		{3, 300, 305, lengths(14, 16, 17, 18, 19)}, // Diners Club
		{4, 3095, 3095, lengths(14, 16, 17, 18, 19)},
		{2, 36, 36, lengths(14, 16, 17, 18, 19)},
		{2, 38, 39, len16to19},
		{2, 62, 62, len16to19},                               // UnionPay
		{2, 81, 81, len16to19},                               // UnionPay
		{4, 5018, 5018, lengths(13, 14, 15, 16, 17, 18, 19)}, // Maestro
		{4, 5020, 5020, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 5038, 5038, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 5893, 5893, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 6304, 6304, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 6759, 6759, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 6761, 6763, lengths(13, 14, 15, 16, 17, 18, 19)},
		{4, 2200, 2204, len16to19}, // Mir
		{2, 60, 60, lengths(16)},   // RuPay
		{3, 508, 508, lengths(16)},
		{2, 82, 82, lengths(16)},
	}
)

// inScheme reports whether digits have the IIN and the length of a card
// scheme.
func inScheme(digits []byte) bool {
	for _, s := range schemes {
		if len(digits) < s.digits || s.lengths&(1<<len(digits)) == 0 {
			continue
		}
		p := 0
		for _, c := range digits[:s.digits] {
			p = p*10 + int(c-'0')
		}
		if s.lo <= p && p <= s.hi {
			return true
		}
	}
	return false
}

// luhn reports whether digits, ASCII digits only, pass the Luhn check:
// doubling every second digit from the right (less 9 when the double is
// over 9), the sum is a multiple of 10.
func luhn(digits string) bool {
	if digits == "" {
		return false
	}
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		c := digits[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWord reports whether c continues an identifier or a number next to a
// digit run: then the run is part of something else (an id, a float, a
// hex string), not a card number standing on its own.
func isWord(c byte) bool {
	return isDigit(c) || c == '_' || c == '.' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// group is a run of digits text[start:end].
type group struct{ start, end int }

// findCards appends the card numbers of text[from:to], a run of digits
// and separators, as they are written there (with their separators);
// words are where the automaton found card words (Find checks that each is
// a word of its own).
func findCards(text string, from, to int, words []span, out []span) []span {
	var groups [maxCardDigits + 1]group
	for i := from; i < to; {
		if !isDigit(text[i]) || (i > 0 && isWord(text[i-1])) {
			i++
			continue
		}
		// A candidate starts here: a run of digits, or groups of digits
		// joined by one kind of separator.
		n := 0
		var sep byte
		j := i
		for {
			k := j
			for k < len(text) && isDigit(text[k]) {
				k++
			}
			groups[n] = group{j, k}
			n++
			if k-j > 6 || n == len(groups) {
				break
			}
			if k+1 < len(text) && (text[k] == ' ' || text[k] == '-') && isDigit(text[k+1]) && (sep == 0 || sep == text[k]) {
				sep = text[k]
				j = k + 1
				continue
			}
			break
		}
		if n > 1 && groups[n-1].end-groups[n-1].start > 6 {
			n-- // a long run after groups: a number of its own, next
		}
		if s, ok := cardIn(text, groups[:n], words); ok {
			out = append(out, s)
		}
		i = groups[n-1].end
	}
	return out
}

// cardIn returns the card number that groups make, whole or less a short
// first or last group, if it stands on its own.
func cardIn(text string, groups []group, words []span) (span, bool) {
	short := func(g group) bool { return g.end-g.start <= 3 }
	n := len(groups)
	var buf [4][2]int
	tries := append(buf[:0], [2]int{0, n})
	if n > 1 && short(groups[n-1]) {
		tries = append(tries, [2]int{0, n - 1})
	}
	if n > 1 && short(groups[0]) {
		tries = append(tries, [2]int{1, n})
		if n > 2 && short(groups[n-1]) {
			tries = append(tries, [2]int{1, n - 1})
		}
	}
	var digits [maxCardDigits]byte
	for _, t := range tries {
		gs := groups[t[0]:t[1]]
		count := 0
		for _, g := range gs {
			count += g.end - g.start
		}
		if count < minCardDigits || count > maxCardDigits {
			continue
		}
		start, end := gs[0].start, gs[len(gs)-1].end
		if end < len(text) && isWord(text[end]) && !(text[end] == '.' && (end+1 == len(text) || !isDigit(text[end+1]))) {
			continue // glued to a word or a decimal part
		}
		d := digits[:0]
		for _, g := range gs {
			d = append(d, text[g.start:g.end]...)
		}
		if !inScheme(d) || !luhn(string(d)) {
			continue
		}
		if (len(gs) > 1 && cardGrouping(gs)) || cardWordNear(text, words, start, end) {
			return span{start, end}, true
		}
	}
	return span{}, false
}

// cardGrouping reports whether groups, two or more, are grouped as cards
// are printed: fours with a last group of one to four, or 4-6-5 and 4-6-4.
func cardGrouping(groups []group) bool {
	size := func(i int) int { return groups[i].end - groups[i].start }
	if len(groups) == 3 && size(0) == 4 && size(1) == 6 && (size(2) == 5 || size(2) == 4) {
		return true
	}
	for i := range groups {
		if s := size(i); s != 4 && (i < len(groups)-1 || s < 1 || s > 4) {
			return false
		}
	}
	return true
}

// cardWordNear reports whether a card word ends at most cardBefore bytes
// before start or begins at most cardAfter bytes after end, in the same
// member when the text is JSON: a card word in another member
// ({"card_brand":"visa","customer_id":5105…}) says nothing of this
// number.
func cardWordNear(text string, words []span, start, end int) bool {
	for _, w := range words {
		if (w.end <= start && start-w.end <= cardBefore && !memberBoundary(text[w.end:start])) ||
			(w.start >= end && w.start-end <= cardAfter && !memberBoundary(text[end:w.start])) {
			return true
		}
	}
	return false
}

// memberBoundary reports whether between, the text between a card word
// and a number, crosses from one member of a JSON object or element of an
// array to the next: a comma next to a quote, or a comma before a
// brace or bracket, raw or escaped as JSON in a string.
func memberBoundary(between string) bool {
	for i := 0; i < len(between); i++ {
		if between[i] != ',' {
			continue
		}
		if i > 0 && between[i-1] == '"' {
			return true
		}
		if i+1 < len(between) {
			switch between[i+1] {
			case '"', '{', '[':
				return true
			case '\\':
				return i+2 < len(between) && between[i+2] == '"'
			}
		}
	}
	return false
}

// isCardWord reports whether text[at:at+n] is a word of its own: not
// inside a longer word, though it may be part of a name (card_number,
// cardNumber, creditCard).
func isCardWord(text string, at, n int) bool {
	isLower := func(c byte) bool { return 'a' <= c && c <= 'z' }
	isUpper := func(c byte) bool { return 'A' <= c && c <= 'Z' }
	before := at == 0 || !isLetter(text[at-1]) || (isLower(text[at-1]) && isUpper(text[at]))
	e := at + n
	after := e == len(text) || !isLetter(text[e]) || (isLower(text[e-1]) && isUpper(text[e]))
	return before && after
}
