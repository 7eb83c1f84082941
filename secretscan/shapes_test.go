package secretscan_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// TestOwnShapes: the shapes gitleaks has no default rule for, each found
// where it is a secret (exactly the secret, as it stands) and left where
// it is not.
func TestOwnShapes(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	aws := "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + fake(alnum, 10)
	id := "AKIA" + fake(upper32, 16)
	pw := fake(alnum, 20)
	tok := fake(urlsafe, 32)
	sig := fake("0123456789abcdef", 64)
	basic := base64.StdEncoding.EncodeToString([]byte("ops:" + pw))
	for _, c := range []struct {
		text string
		want []string
	}{
		// AWS secret access keys: beside an id, on either side, or named.
		{"key " + id + " secret " + aws, []string{id, aws}},
		{aws + " goes with " + id, []string{aws, id}},
		{"aws_secret_access_key = " + aws, []string{aws}},
		{`{"SecretAccessKey":"` + aws + `"}`, []string{aws}},
		{"User,Secret access key\nops," + aws + ",x", []string{aws}},
		{"value " + aws, nil},                                          // no id, no name
		{"aws_secret_access_key = " + strings.ToLower(aws), nil},       // no upper case
		{"aws_secret_access_key = " + aws + "Q", nil},                  // 41 characters
		{"aws_secret_access_key = " + strings.Repeat("Ab1/", 10), nil}, // low entropy
		// Passwords in URLs: the password alone, as it stands.
		{"postgres://app:" + pw + "@db:5432/x", []string{pw}},
		{"dsn=mysql://root:" + pw + "%40x@localhost/shop?tls=1", []string{pw + "%40x"}},
		{"redis://:" + pw + "@cache:6379", []string{pw}},
		{"https://bob:" + pw + "@example.com/", []string{pw}},
		{"amqp://guest:pw@mq:5672/ (pw is short)", []string{"guest:pw"}},
		{"postgres://app@db:5432/x", nil},
		{"postgres://app:@db:5432/x", nil},
		{"postgres://app:${DB_PASSWORD}@db/x", nil},
		{"mysql://root:****@localhost/x", nil},
		{"mongodb://svc:%s@cluster0/app", nil},
		{"git@github.com:org/repo.git", nil},
		{"https://example.com:8443/path@v2", nil},
		// Tokens in a query or a fragment.
		{"https://x.example/cb?code=" + tok + "&state=1", []string{tok}},
		{"https://x.example/#access_token=" + tok + "&token_type=bearer", []string{tok}},
		{"<a href=\"/dl?id=1&amp;token=" + tok + "\">", []string{tok}},
		{"https://x.example/v?X-Amz-Signature=" + sig, []string{sig}},
		{"https://x.example/?api_key=" + tok, []string{tok}},
		{"https://x.example/?refresh_token=" + tok, []string{tok}},
		{"https://x.example/?code=200&key=name&country_code=US", nil},
		{"https://x.example/?promo_code=" + tok, nil},                // not a token's name
		{"https://x.example/?token=" + strings.Repeat("7", 20), nil}, // all digits
		{"https://x.example/?token=${TOKEN}", nil},
		{"token=" + tok, nil}, // not in a query
		// Authorization.
		{"Authorization: Bearer " + tok, []string{tok}},
		{`{"Authorization":"Bearer ` + tok + `"}`, []string{tok}},
		{"authorization: basic " + basic, []string{basic}},
		{"Bearer authentication is required", nil},
		{"Authorization: Bearer <token>", nil},
		{"Authorization: Basic ${CREDENTIALS}", nil},
		{"Basic realm=admin and Basic dGhlIHF1aWNrIGJyb3du", nil}, // base64 with no ':'
		{"Upgrade from the Basic plan", nil},
	} {
		if got := d.Find(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Find(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestEncodedSecrets: a secret found through its encodings, nested, is
// returned as it stands (a percent-encoded key percent-encoded, an
// escaped one escaped, the whole base64 run that holds one), and what is
// returned covers it: replaced, nothing of it is left. Four layers are
// undone, not five.
func TestEncodedSecrets(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	key := "ghp_" + fake(alnum, 36)
	pw := fake(alnum, 8) + "/+" + fake(alnum, 8)
	dsn := url.URL{Scheme: "postgres", User: url.UserPassword("a", pw), Host: "h", Path: "/d"}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	jsonStr := func(s string) string { return strings.Trim(jsonString(s), `"`) }
	for _, c := range []struct {
		name, text, secret string
		want               []string
	}{
		{"after %3D", "next=%2Fcb%3Ftoken%3D" + key + "%26x%3D1", key, []string{key}},
		{"escaped closing", `{\"k\":\"` + key + `\"}`, key, []string{key}},
		{"\\u escapes", `{"k":"` + strings.ReplaceAll(key, "_", `\u005f`) + `"}`, key, []string{strings.ReplaceAll(key, "_", `\u005f`)}},
		{"percent-encoded password", "u=" + url.QueryEscape(dsn.String()), pw, []string{url.QueryEscape(strings.TrimSuffix(strings.TrimPrefix(dsn.String(), "postgres://a:"), "@h/d"))}},
		{"base64", "blob " + b64("token "+key) + " end", key, []string{b64("token " + key)}},
		{"base64 of escaped JSON", b64(`{"a":"{\"k\":\"` + key + `\"}"}`), key, []string{b64(`{"a":"{\"k\":\"` + key + `\"}"}`)}},
		{"four layers", b64(url.QueryEscape(jsonStr(jsonStr(`"` + key + `"`)))), key, []string{b64(url.QueryEscape(jsonStr(jsonStr(`"` + key + `"`))))}},
		{"five layers", b64(b64(b64(b64(b64("k " + key))))), key, nil},
	} {
		got := d.Find(c.text)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Find(%q) = %q, want %q", c.name, c.text, got, c.want)
			continue
		}
		if c.want != nil && strings.Contains(replaceFound(c.text, got), c.secret) {
			t.Errorf("%s: secret left", c.name)
		}
	}
}

// TestWrappedBase64: a base64 body wrapped as in a PEM or a MIME part is
// returned whole, lines and breaks, whatever line holds the secret; a
// short line after a body that is not of its width is not part of it.
func TestWrappedBase64(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	key := "glpat-" + fake(urlsafe, 20)
	body := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("padding line of prose ", 6) + "GITLAB_TOKEN=" + key + "\n"))
	for _, c := range []struct{ nl, width int }{{1, 64}, {2, 76}, {1, 76}} {
		nl := "\n"
		if c.nl == 2 {
			nl = "\r\n"
		}
		var lines []string
		for s := body; s != ""; {
			n := min(c.width, len(s))
			lines, s = append(lines, s[:n]), s[n:]
		}
		wrapped := strings.Join(lines, nl)
		text := "-----BEGIN X-----" + nl + wrapped + nl + "-----END X-----" + nl + "Zm9vYmFyYmF6cXV4cXV1eA" + nl
		if got := d.Find(text); !slices.Equal(got, []string{wrapped}) {
			t.Errorf("width %d: Find = %q, want the body %q", c.width, got, wrapped)
		}
	}
}

// TestAdversarialInput: texts built to make Find work (every layer
// branching, long runs, deep nesting, many keywords) end, and what Find
// returns stands in the text.
func TestAdversarialInput(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	for _, text := range []string{
		strings.Repeat(`\"%41+`+base64.StdEncoding.EncodeToString([]byte(`\"%41+aaaaaaaaaaaaaaaaaaaa`)), 2000),
		strings.Repeat("ey", 50000),
		strings.Repeat("s.", 50000),
		strings.Repeat("4111 ", 20000),
		strings.Repeat("a", 200000),
		strings.Repeat("://a:b@", 10000),
		strings.Repeat("?token=", 10000),
		strings.Repeat("-----BEGIN PRIVATE KEY-----", 3000),
	} {
		for _, f := range d.Find(text) {
			if !strings.Contains(text, f) {
				t.Fatalf("Find returned %q, not in the text", f)
			}
		}
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
