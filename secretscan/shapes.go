package secretscan

import (
	"math"
	"strings"
)

// The shapes gitleaks has no default rule for, secretscan's own: each is
// woken by keywords of the same automaton and looks only near them.
//
//   - AWS secret access key: 40 characters of base64's alphabet, standing
//     alone, with upper- and lower-case letters and digits and an entropy
//     above awsEntropy, within awsReach bytes of an AWS access key id
//     (AKIA…, ASIA…, on either side) or after a name of one
//     (aws_secret_access_key, SecretAccessKey, "Secret access key").
//   - Password in a URL: scheme://user:password@host returns the password
//     as it stands (percent-encoded where it is), and leaves the user, the
//     host and the rest; a password shorter than minPassword is returned
//     with its user (user:pw), which the guard can replace where it stands
//     and nowhere else; an empty password, or a placeholder (${…}, {…},
//     <…>, %s, a mask of '*' or 'x') is none.
//   - Token in a URL's query or fragment: the value of a parameter named
//     token, key, secret, signature, sig, code, password, passwd, pwd,
//     auth, access_token and the like (queryNames, or a name ending in
//     _token, _secret, _password, _signature), after '?', '&', ';' or
//     '#', of at least minToken characters, not all digits, not a
//     placeholder, with an entropy of at least tokenEntropy: a promo
//     code, a status code or a page key is none.
//   - Authorization: Bearer and Basic: the credentials after the word. A
//     Basic value is one that decodes to user:password; a Bearer value
//     has at least minToken characters, letters and digits, and an
//     entropy of at least tokenEntropy ("Bearer authentication is
//     required" holds none).

const (
	awsReach     = 200
	awsEntropy   = 4.0
	minToken     = 16
	tokenEntropy = 3.0
	maxToken     = 1024
	minPassword  = 8
)

// own names the shape a keyword of secretscan's own wakes.
type own uint8

const (
	ownAWSID own = iota + 1
	ownAWSName
	ownURL
	ownQuery
	ownAuth
	ownCard
)

// ownKeywords are the keywords of the own shapes.
var ownKeywords = map[own][]string{
	ownAWSID:   {"akia", "asia", "abia", "acca", "a3t"},
	ownAWSName: {"secret_access_key", "secretaccesskey", "secret access key", "secret-access-key", "aws_secret"},
	ownURL:     {"://"},
	ownQuery:   {"token=", "key=", "secret=", "signature=", "sig=", "code=", "password=", "passwd=", "pwd=", "auth="},
	ownAuth:    {"bearer", "basic"},
	ownCard:    cardWords,
}

// queryNames are the query parameters that hold a token.
var queryNames = map[string]bool{
	"token": true, "access_token": true, "refresh_token": true, "id_token": true, "auth_token": true,
	"session_token": true, "private_token": true, "api_token": true, "x-amz-security-token": true,
	"key": true, "api_key": true, "apikey": true, "access_key": true, "secret_key": true, "private_key": true,
	"secret": true, "client_secret": true, "api_secret": true,
	"signature": true, "sig": true, "x-amz-signature": true, "x-goog-signature": true,
	"code": true, "password": true, "passwd": true, "pwd": true, "auth": true,
}

// findOwn returns the secret that the own shape k finds at a keyword at
// text[at:at+n], as spans of text.
func findOwn(text string, k own, at, n int, out []span) []span {
	switch k {
	case ownAWSID:
		if !isAWSID(text, at) {
			return out
		}
		return awsSecretNear(text, max(0, at-awsReach), min(len(text), at+n+awsReach), out)
	case ownAWSName:
		return awsSecretNear(text, at+n, min(len(text), at+n+awsReach), out)
	case ownURL:
		return urlPassword(text, at, out)
	case ownQuery:
		return queryToken(text, at, n, out)
	case ownAuth:
		return authValue(text, at, n, out)
	}
	return out
}

// isAWSID reports whether an AWS access key id (a prefix, then 16 upper-case
// letters and digits 2-7 in all) starts at text[at:].
func isAWSID(text string, at int) bool {
	if at+20 > len(text) || (at > 0 && isAlnum(text[at-1])) || (at+20 < len(text) && isAlnum(text[at+20])) {
		return false
	}
	for i := at; i < at+20; i++ {
		if c := text[i]; !('A' <= c && c <= 'Z' || '2' <= c && c <= '7') && !(i < at+4 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// awsSecretNear appends the AWS secret access keys of text[from:to].
func awsSecretNear(text string, from, to int, out []span) []span {
	for i := from; i < to; {
		if !isB64Std(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isB64Std(text[j]) {
			j++
		}
		if j-i == 40 && (i == 0 || !isB64Word(text[i-1])) && (j == len(text) || (!isB64Word(text[j]) && text[j] != '=')) && awsSecretLike(text[i:j]) {
			out = append(out, span{i, j})
		}
		i = j
	}
	return out
}

func awsSecretLike(s string) bool {
	var u, l, d bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		u = u || 'A' <= c && c <= 'Z'
		l = l || 'a' <= c && c <= 'z'
		d = d || '0' <= c && c <= '9'
	}
	return u && l && d && entropy(s) > awsEntropy
}

// urlPassword appends the password of the URL whose "://" is at text[at:].
func urlPassword(text string, at int, out []span) []span {
	scheme := 0
	for i := at - 1; i >= 0 && (isAlnum(text[i]) || text[i] == '+' || text[i] == '.' || text[i] == '-'); i-- {
		scheme++
	}
	if scheme < 2 {
		return out
	}
	start := at + 3
	end, atSign, colon := start, -1, -1
	for ; end < len(text) && end-start < 512; end++ {
		c := text[end]
		if c == '/' || c == '?' || c == '#' || isSpace(c) || c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\' || c == '`' {
			break
		}
		if c == '@' {
			atSign = end
		}
		if c == ':' && colon < 0 && atSign < 0 {
			colon = end
		}
	}
	if atSign < 0 || colon < 0 || colon > atSign || atSign+1 == end {
		return out
	}
	pw := text[colon+1 : atSign]
	if pw == "" || placeholder(pw) {
		return out
	}
	if len(pw) < minPassword {
		// The guard replaces what Find returns wherever it occurs in the
		// string: a short password alone ("pw") would be replaced in
		// every word that holds it, "user:pw" where it is.
		return append(out, span{start, atSign})
	}
	return append(out, span{colon + 1, atSign})
}

// queryToken appends the value of the query parameter whose name ends with
// the keyword (which ends with '=') at text[at:at+n].
func queryToken(text string, at, n int, out []span) []span {
	eq := at + n - 1
	ns := eq
	for ns > 0 && (isAlnum(text[ns-1]) || text[ns-1] == '_' || text[ns-1] == '-' || text[ns-1] == '.') {
		ns--
	}
	if ns == 0 || !strings.ContainsRune("?&;#", rune(text[ns-1])) {
		return out
	}
	name := strings.ToLower(text[ns:eq])
	if !queryNames[name] && !hasAnySuffix(name, "_token", "-token", "_secret", "_password", "_signature") {
		return out
	}
	vs, ve := eq+1, eq+1
	for ve < len(text) && ve-vs < maxToken && !strings.ContainsRune("&#;,)?\"'<>\\` \t\r\n", rune(text[ve])) {
		ve++
	}
	if v := text[vs:ve]; tokenLike(v) {
		out = append(out, span{vs, ve})
	}
	return out
}

// authValue appends the credentials after Bearer or Basic at text[at:at+n].
func authValue(text string, at, n int, out []span) []span {
	if at > 0 && isLetter(text[at-1]) {
		return out
	}
	vs := at + n
	for vs < len(text) && (text[vs] == ' ' || text[vs] == '\t') {
		vs++
	}
	if vs == at+n {
		return out
	}
	ve := vs
	for ve < len(text) && ve-vs < maxToken && (isAlnum(text[ve]) || strings.IndexByte("._~+/=-", text[ve]) >= 0) {
		ve++
	}
	v := text[vs:ve]
	if (text[at]|0x20) == 'b' && (text[at+1]|0x20) == 'a' { // Basic
		creds, ok := unbase64(strings.TrimRight(v, "="))
		if !ok || len(v) < 8 {
			return out
		}
		if _, pw, ok := strings.Cut(creds, ":"); !ok || pw == "" {
			return out
		}
		return append(out, span{vs, ve})
	}
	if !tokenLike(v) {
		return out
	}
	var letter, digit bool
	for i := 0; i < len(v); i++ {
		letter = letter || isLetter(v[i])
		digit = digit || '0' <= v[i] && v[i] <= '9'
	}
	if letter && digit {
		out = append(out, span{vs, ve})
	}
	return out
}

// tokenLike reports whether v could be a token: long enough, not all
// digits, not a placeholder, random enough.
func tokenLike(v string) bool {
	if len(v) < minToken || placeholder(v) {
		return false
	}
	digits := true
	for i := 0; i < len(v) && digits; i++ {
		digits = '0' <= v[i] && v[i] <= '9'
	}
	return !digits && entropy(v) >= tokenEntropy
}

// placeholder reports whether v stands for a secret rather than being one:
// a template (${…}, {…}, <…>, %s) or a mask (***, xxxx).
func placeholder(v string) bool {
	switch v[0] {
	case '$', '{', '<', '[':
		return true
	}
	if v == "%s" || strings.EqualFold(v, "redacted") {
		return true
	}
	return strings.Trim(v, "*xX•.") == ""
}

// entropy is the Shannon entropy of s in bits per character.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	e := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			e -= p * math.Log2(p)
		}
	}
	return e
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool  { return isLetter(c) || '0' <= c && c <= '9' }
func isB64Std(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// isB64Word reports whether c would continue a run of base64 of either
// alphabet.
func isB64Word(c byte) bool { return isB64Std(c) || c == '-' || c == '_' }
