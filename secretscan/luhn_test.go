package secretscan

import (
	"slices"
	"testing"
)

// TestLuhn: the check digit of known card numbers (the networks' published
// test numbers), and a one-digit change or a swap of two neighbours fails.
func TestLuhn(t *testing.T) {
	for _, n := range []string{
		"4111111111111111", "4242424242424242", "5555555555554444", "2223003122003222",
		"378282246310005", "6011111111111117", "3530111333300000", "4000056655665556",
		"4222222222222", "6200000000000005", "79927398713", "0", "00",
	} {
		if !luhn(n) {
			t.Errorf("luhn(%q) = false", n)
		}
	}
	for _, n := range []string{
		"4111111111111112", "4242424242424241", "5555555555554445", "378282246310006",
		"79927398710", "1", "", "41111111111111a1", "4111 1111 1111 1111",
		"4111111111111121", // two neighbours swapped
	} {
		if luhn(n) {
			t.Errorf("luhn(%q) = true", n)
		}
	}
}

// TestFindCards: card numbers in one run or grouped by spaces or dashes,
// as written; not numbers that fail Luhn, start with another digit, have
// fewer than 13 or more than 19 digits, mix separators, or are part of a
// word, an id or a decimal number.
func TestFindCards(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"card 4111111111111111 on file", []string{"4111111111111111"}},
		{"card 4111 1111 1111 1111, exp 12/30", []string{"4111 1111 1111 1111"}},
		{"amex 3782-822463-10005.", []string{"3782-822463-10005"}},
		{"4242424242424242", []string{"4242424242424242"}},
		{`{"pan":5555555555554444}`, []string{"5555555555554444"}},
		{"two: 4111111111111111 and 6011 1111 1111 1117", []string{"4111111111111111", "6011 1111 1111 1117"}},
		{"ref 12 4111 1111 1111 1111", []string{"4111 1111 1111 1111"}}, // a leading group that spoils Luhn is left out
		{"order 4111111111111112", nil},                                 // fails Luhn
		{"ts 1700000000000 and 1700000000000000000", nil},               // timestamps: start with 1
		{"ord_4111111111111111", nil},                                   // part of an id
		{"x4111111111111111", nil},
		{"4111111111111111abc", nil},
		{"0.4111111111111111", nil}, // a decimal part
		{"4111111111111111.25", nil},
		{"4111 1111-1111 1111", nil},                      // mixed separators
		{"4111  1111 1111 1111", nil},                     // two spaces
		{"411111111111", nil},                             // 12 digits
		{"41111111111111111111", nil},                     // 20 digits
		{"123e4567-e89b-12d3-a456-426614174000", nil},     // a UUID
		{"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", nil}, // a git SHA
		{"", nil},
		{"1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3", nil},           // groups too short
		{"4111 1111 1111 1111 110", []string{"4111 1111 1111 1111 110"}}, // 19 digits
		{"4111 1111 1111 1111 111", []string{"4111 1111 1111 1111"}},     // the longest card it starts with
	} {
		if got := findCards(c.text); !slices.Equal(got, c.want) {
			t.Errorf("findCards(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
