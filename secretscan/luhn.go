package secretscan

// Card numbers: 13 to 19 digits, in one run or in groups of digits joined
// by one kind of separator (a single space or a single dash, as in
// "4111 1111 1111 1111" or "3782-822463-10005", each group of 3 to 6
// digits), whose first digit is that
// of a payment card issuer (2 to 6: Mastercard's 2-series, Amex, Diners and
// JCB, Visa, Mastercard, Discover and UnionPay) and whose Luhn check digit
// is valid. The first-digit rule keeps the 13-digit millisecond and
// 19-digit nanosecond Unix timestamps of today (which start with 1) and
// zero-padded counters out; Luhn keeps nine in ten of the remaining
// numbers of that length out.

const (
	minCardDigits = 13
	maxCardDigits = 19
)

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

// findCards returns the card numbers of text, as they are written there
// (with their separators).
func findCards(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		if !isDigit(text[i]) || (i > 0 && isWord(text[i-1])) {
			i++
			continue
		}
		// A candidate starts here: collect its groups, joined by one kind
		// of separator.
		groups := []group{}
		var sep byte
		j := i
		for {
			k := j
			for k < len(text) && isDigit(text[k]) {
				k++
			}
			groups = append(groups, group{j, k})
			if k+1 < len(text) && (text[k] == ' ' || text[k] == '-') && isDigit(text[k+1]) &&
				(sep == 0 || sep == text[k]) && len(groups) < maxCardDigits {
				sep = text[k]
				j = k + 1
				continue
			}
			j = k
			break
		}
		if card, end, ok := cardIn(text, groups); ok {
			out = append(out, card)
			i = end
			continue
		}
		// Nothing from here; go on after the first group.
		i = groups[0].end
	}
	return out
}

// cardIn looks for the longest card number made of the leading groups
// (groups[0:n]) that stands on its own, and returns it with its end.
func cardIn(text string, groups []group) (string, int, bool) {
	var digits [maxCardDigits]byte
	for n := len(groups); n >= 1; n-- {
		count := 0
		for _, g := range groups[:n] {
			count += g.end - g.start
		}
		if count < minCardDigits || count > maxCardDigits || (n > 1 && !cardGroups(groups[:n])) {
			continue
		}
		end := groups[n-1].end
		if end < len(text) && isWord(text[end]) && !(text[end] == '.' && (end+1 == len(text) || !isDigit(text[end+1]))) {
			continue // glued to a word or a decimal part
		}
		d := digits[:0]
		for _, g := range groups[:n] {
			d = append(d, text[g.start:g.end]...)
		}
		if d[0] < '2' || d[0] > '6' || !luhn(string(d)) {
			continue
		}
		return text[groups[0].start:end], end, true
	}
	return "", 0, false
}

// cardGroups reports whether groups, two or more, have the lengths of a
// card number's groups: 3 to 6 digits each.
func cardGroups(groups []group) bool {
	for _, g := range groups {
		if n := g.end - g.start; n < 3 || n > 6 {
			return false
		}
	}
	return true
}
