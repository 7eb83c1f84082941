package fakemodel

import "strings"

// spaced returns the JSON text b with white space inside, as some servers
// and proxies write it: a space after every colon and comma and inside
// every brace and bracket, an empty object too. Strings are left alone.
func spaced(b []byte) string {
	var out strings.Builder
	in, escaped := false, false
	for _, c := range b {
		switch {
		case in:
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				in = false
			}
		case c == '}' || c == ']':
			out.WriteByte(' ')
			out.WriteByte(c)
		case c == ':' || c == ',' || c == '{' || c == '[':
			out.WriteByte(c)
			out.WriteByte(' ')
		default:
			in = c == '"'
			out.WriteByte(c)
		}
	}
	return out.String()
}
