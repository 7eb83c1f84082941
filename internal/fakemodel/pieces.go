package fakemodel

import "unicode/utf8"

// chunks splits text after each space, as a model streams words.
func chunks(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			out = append(out, text[start:i+1])
			start = i + 1
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// halves splits s in two at a character boundary (for arguments streamed
// in pieces); a short s is one piece.
func halves(s string) []string {
	i := len(s) / 2
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return []string{s}
	}
	return []string{s[:i], s[i:]}
}

// pieces splits s into at most n pieces of about equal length at character
// boundaries (for arguments streamed in many deltas, as the real APIs
// stream them); a short s gives fewer pieces, "" none.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 && n > 0 {
		i := (len(s) + n - 1) / n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s, n = s[i:], n-1
	}
	return out
}
