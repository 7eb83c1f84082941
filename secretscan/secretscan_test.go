package secretscan_test

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// The keys below are made up at run time from a seeded generator: they have
// the shape (and the entropy) of real credentials and grant nothing, and no
// key-shaped literal sits in the source.

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	urlsafe = alnum + "_-"
	upper32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	digits  = "0123456789"
)

var gen = rand.New(rand.NewPCG(7, 35))
var genMu sync.Mutex

// fake returns n characters drawn from alphabet.
func fake(alphabet string, n int) string {
	genMu.Lock()
	defer genMu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[gen.IntN(len(alphabet))]
	}
	return string(b)
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// fakeJWT is a token of HS256's shape, its signature random.
func fakeJWT() string {
	return b64url(`{"alg":"HS256","typ":"JWT"}`) + "." +
		b64url(`{"sub":"user-`+fake(digits, 6)+`","iat":1767225600,"exp":1767229200}`) + "." + fake(urlsafe, 43)
}

// fakePEM is a private key block of a key's length, its body random.
func fakePEM(kind string) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + kind + "PRIVATE KEY-----\n")
	for range 12 {
		b.WriteString(fake(alnum+"+/", 64) + "\n")
	}
	b.WriteString(fake(alnum+"+/", 20) + "==\n-----END " + kind + "PRIVATE KEY-----")
	return b.String()
}

// shapes are the secrets the default Detector finds, by kind.
func shapes() map[string]string {
	return map[string]string{
		"openai legacy":       "sk-" + fake(alnum, 20) + "T3BlbkFJ" + fake(alnum, 20),
		"openai project":      "sk-proj-" + fake(urlsafe, 74) + "T3BlbkFJ" + fake(urlsafe, 74),
		"openai service":      "sk-svcacct-" + fake(urlsafe, 58) + "T3BlbkFJ" + fake(urlsafe, 58),
		"anthropic":           "sk-ant-api03-" + fake(urlsafe, 93) + "AA",
		"aws access key":      "AKIA" + fake(upper32, 16),
		"github pat":          "ghp_" + fake(alnum, 36),
		"github fine-grained": "github_pat_" + fake(alnum+"_", 82),
		"github oauth":        "gho_" + fake(alnum, 36),
		"google api key":      "AIza" + fake(urlsafe, 35),
		"slack bot":           "xoxb-" + fake(digits, 12) + "-" + fake(digits, 13) + "-" + fake(alnum, 24),
		"stripe live":         "sk_live_" + fake(alnum, 24),
		"stripe restricted":   "rk_live_" + fake(alnum, 24),
		"jwt":                 fakeJWT(),
		"rsa private key":     fakePEM("RSA "),
		"openssh private key": fakePEM("OPENSSH "),
		"pkcs8 private key":   fakePEM(""),
		"card grouped":        "5555 5555 5555 4444",
		"card amex dashes":    "3782-822463-10005",
	}
}

func newDetector(t testing.TB, opts secretscan.Options) *secretscan.Detector {
	t.Helper()
	d, err := secretscan.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestShapes: each kind of secret is found, exactly, in a sentence, in JSON
// text, on a line of its own and at the very start and end of the text.
func TestShapes(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	for kind, secret := range shapes() {
		for _, text := range []string{
			"here it is: " + secret + " (keep it safe)",
			`{"result":"` + secret + `","ok":true}`,
			"line one\n" + secret + "\nline three",
			secret,
			"Your new key is " + secret + ". Keep it safe, (" + secret + ")",
		} {
			got := d.Find(text)
			if !slices.Contains(got, secret) {
				t.Errorf("%s: Find(%q) = %q, want it found", kind, text, got)
			}
			for _, g := range got {
				if g != secret {
					t.Errorf("%s: Find(%q) also found %q", kind, text, g)
				}
			}
		}
	}
}

// TestGenericAssignment: gitleaks' generic-api-key rule finds a random
// value assigned to a name like password, token or secret, whatever its
// shape (the value only, not the name), and leaves a value of words, a
// placeholder, or a value of low entropy. It is on with Options.Generic
// only.
func TestGenericAssignment(t *testing.T) {
	d := newDetector(t, secretscan.Options{Generic: true})
	pw := fake(alnum, 24)
	for _, text := range []string{
		`{"db_password": "` + pw + `"}`,
		"DB_PASSWORD=" + pw,
		"api_token: " + pw,
	} {
		if got := d.Find(text); !slices.Equal(got, []string{pw}) {
			t.Errorf("Find(%q) = %q, want [%q]", text, got, pw)
		}
	}
	for _, text := range []string{
		`{"password": "changeme"}`,
		`{"token": "aaaaaaaaaaaaaaaaaaaa"}`,
		`{"api_version": "2024-10-01"}`,
		`{"secret_name": "prod/billing/stripe"}`,
	} {
		if got := d.Find(text); len(got) != 0 {
			t.Errorf("Find(%q) = %q, want nothing", text, got)
		}
	}
	// gitleaks flags a UUID or a git SHA assigned to such a name in the
	// same text (a session token may well be a UUID); alone, or under
	// another name, they are not flagged (TestNotSecrets). The guard asks
	// about each string of an output, not its member names, so this rule
	// sees names only inside a string (a config file, a log line).
	for _, v := range []string{"123e4567-e89b-12d3-a456-426614174000", "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"} {
		if got := d.Find("session_token=" + v); !slices.Equal(got, []string{v}) {
			t.Errorf("Find(session_token=%s) = %q", v, got)
		}
	}
	off := newDetector(t, secretscan.Options{})
	if got := off.Find(`{"db_password": "` + pw + `"}`); len(got) != 0 {
		t.Errorf("without Generic: %q", got)
	}
}

// TestNotSecrets: what tool outputs are full of is not flagged: ids, UUIDs,
// git SHAs (alone, and under a name like "commit" or "sha"), order numbers
// that fail Luhn, timestamps, prices, prose and URLs. What gitleaks does
// with a SHA or a UUID under a secret-like name is stated below.
func TestNotSecrets(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	for _, text := range []string{
		"order 4111111111111112 shipped",                // 16 digits, Luhn fails
		`{"order_number": 5105105105105101}`,            // Luhn fails
		`{"id":"123e4567-e89b-12d3-a456-426614174000"}`, // a UUID
		`{"request_id":"6f1c2a7e-9b4d-4c1e-8f3a-2d5b7c9e0a14"}`,
		"commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", // a git SHA
		`{"sha":"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3","parent":"356a192b7913b04c54574d18c28d46e6395428ab"}`,
		`{"created_ms":1767225600000,"created_ns":1767225600000000000}`,
		`{"amount":"1234.56","currency":"EUR","iban_last4":"4432"}`,
		"The quick brown fox jumps over the lazy dog; the key to success is keeping it simple.",
		`{"url":"https://example.com/orders?page=2&per_page=50"}`,
		`{"phone":"+1 415 555 0132","zip":"94103"}`,
		`{"token_type":"Bearer","expires_in":3600}`,
		"",
	} {
		if got := d.Find(text); len(got) != 0 {
			t.Errorf("Find(%q) = %q, want nothing", text, got)
		}
	}
}

// TestOptions: a rule of the host's own (its secret group only), NoCards,
// and the errors of New.
func TestOptions(t *testing.T) {
	internal := "acme_" + fake(alnum, 32)
	d := newDetector(t, secretscan.Options{
		Rules:   []secretscan.Rule{{ID: "acme-token", Regex: `token=(acme_[A-Za-z0-9]{32})\b`, Keywords: []string{"ACME_"}, Entropy: 3}},
		NoCards: true,
	})
	if got := d.Find("callback?token=" + internal + "&x=1 card 4111111111111111"); !slices.Equal(got, []string{internal}) {
		t.Errorf("Find = %q, want only [%q]", got, internal)
	}
	if got := d.Find("callback?token=acme_" + strings.Repeat("a", 32)); len(got) != 0 {
		t.Errorf("a low-entropy value: %q", got)
	}
	jwt := fakeJWT()
	if got := newDetector(t, secretscan.Options{Disable: []string{"jwt"}}).Find("id " + jwt); len(got) != 0 {
		t.Errorf("jwt disabled: %q", got)
	}
	for _, opts := range []secretscan.Options{
		{Rules: []secretscan.Rule{{ID: "bad", Regex: `(`}}},
		{Rules: []secretscan.Rule{{ID: "", Regex: `x`}}},
		{Rules: []secretscan.Rule{{ID: "empty"}}},
		{Rules: []secretscan.Rule{{ID: "group", Regex: `(a)`, SecretGroup: 2}}},
		{Rules: []secretscan.Rule{{ID: "jwt", Regex: `x`}}}, // a default rule's id
		{Rules: []secretscan.Rule{{ID: "x", Regex: `x`}, {ID: "x", Regex: `y`}}},
		{Disable: []string{"no-such-rule"}},
		{Rules: []secretscan.Rule{{ID: "generic-api-key", Regex: `x`}}}, // a default rule's id, even when off
	} {
		if _, err := secretscan.New(opts); err == nil {
			t.Errorf("New(%+v): no error", opts)
		}
	}
}

// TestFindEach: a secret found twice is returned once; two secrets both;
// every result is a substring of the text.
func TestFindEach(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	s := shapes()
	a, b := s["github pat"], s["aws access key"]
	text := fmt.Sprintf("first %s, again %s, then %s and 4111 1111 1111 1111", a, a, b)
	got := d.Find(text)
	slices.Sort(got)
	want := []string{"4111 1111 1111 1111", a, b}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Find = %q, want %q", got, want)
	}
}

// TestConcurrentFind: one Detector, many goroutines (run with -race).
func TestConcurrentFind(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	s := shapes()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				secret := s["openai project"]
				if i%2 == 1 {
					secret = s["jwt"]
				}
				if got := d.Find("out: " + secret); !slices.Equal(got, []string{secret}) {
					t.Errorf("Find = %q", got)
					return
				}
			}
		})
	}
	// New concurrently too: the default rules are read once.
	for range 4 {
		wg.Go(func() { newDetector(t, secretscan.Options{NoCards: true}) })
	}
	wg.Wait()
}
