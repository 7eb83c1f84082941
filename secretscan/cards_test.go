package secretscan

import (
	"slices"
	"strings"
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

// TestFindCards: card numbers in a card's context, in one run or grouped
// by spaces or dashes, as written; not numbers that fail Luhn, are in no
// scheme's IIN range or of no length of it, stand with no card word and
// in no card's grouping, mix separators, or are part of a word, an id or
// a decimal number.
func TestFindCards(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		{"card 4111111111111111 on file", []string{"4111111111111111"}},
		{"card 4111 1111 1111 1111, exp 12/30", []string{"4111 1111 1111 1111"}},
		{"4111 1111 1111 1111", []string{"4111 1111 1111 1111"}},            // a card's grouping
		{"amex 3782-822463-10005.", []string{"3782-822463-10005"}},          // Amex's 4-6-5
		{"3782 822463 10005", []string{"3782 822463 10005"}},                // its grouping alone
		{"diners 3056 930902 5904", []string{"3056 930902 5904"}},           // 4-6-4
		{`{"pan":5555555555554444}`, []string{"5555555555554444"}},          // a name
		{`{"cardNumber":"2223003122003222"}`, []string{"2223003122003222"}}, // camelCase
		{`{"creditCard":"6011111111111117"}`, []string{"6011111111111117"}},
		{"5555555555554444 (visa)", []string{"5555555555554444"}}, // a word after it
		{"two cards: 4111111111111111 and 6011 1111 1111 1117", []string{"4111111111111111", "6011 1111 1111 1117"}},
		{"ref 12 4111 1111 1111 1111", []string{"4111 1111 1111 1111"}},             // a leading group that spoils Luhn is left out
		{"4111 1111 1111 1111 110", []string{"4111 1111 1111 1111 110"}},            // 19 digits, 4-4-4-4-3
		{"card 4111 1111 1111 1111 111", []string{"4111 1111 1111 1111"}},           // the longest card it starts with
		{`{"card_brand":"visa","customer_id":5105105105105100}`, nil},               // the word is another member's
		{`{\"card_brand\":\"visa\",\"customer_id\":5105105105105100}`, nil},         // escaped JSON too
		{`[{"card":"on file"},{"id":"5105105105105100"}]`, nil},                     // another element's
		{`{"card":{"number":"5105105105105100"}}`, []string{"5105105105105100"}},    // nested in the card's member
		{"card holder,account\nBob,5105105105105100", []string{"5105105105105100"}}, // a CSV cell
		{"4111111111111111", nil},               // no card word, no grouping
		{"order 4111111111111111 shipped", nil}, // an id that passes Luhn
		{"card 4111111111111112", nil},          // fails Luhn
		{"card 378282246310005 and card 3782822463100056", []string{"378282246310005"}}, // Amex is 15 digits
		{"card 9111111111111111", nil},                  // no scheme starts with 9
		{"card 1700000000000 1700000000000000000", nil}, // timestamps: start with 1
		{"IMEI 353129764060372", nil},                   // 15 digits, 35: no scheme
		{"card ord_4111111111111111", nil},              // part of an id
		{"card x4111111111111111", nil},
		{"card 4111111111111111abc", nil},
		{"card 0.4111111111111111", nil}, // a decimal part
		{"card 4111111111111111.25", nil},
		{"card 4111 1111-1111 1111", nil},   // mixed separators
		{"card 4111  1111 1111 1111", nil},  // two spaces
		{"card 411111111111", nil},          // 12 digits
		{"card 41111111111111111111", nil},  // 20 digits
		{"discovery 4111111111111111", nil}, // not a card word
		{"cardinal 4111111111111111", nil},
		{"card " + strings.Repeat(" ", cardBefore) + "4111111111111111", nil}, // too far
		{"", nil},
		{"1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3", nil},
	} {
		if got := d.Find(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Find(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
