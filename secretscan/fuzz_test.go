package secretscan_test

import (
	"strings"
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// FuzzFind: on any text Find does not panic, and returns non-empty
// substrings of the text, each once (with Options.Generic, so that every
// default rule runs too).
func FuzzFind(f *testing.F) {
	d, err := secretscan.New(secretscan.Options{Generic: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"", " ", "\n", "4111 1111 1111 1111", "4111-1111-1111-1111.", "0.4111111111111111",
		"sk-proj-", "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----", "eyJ.eyJ.",
		`{"api_key":"abc"}`, "key=\xff\xfe\xfd token", "İstanbul KEY ey" + strings.Repeat("a", 40),
		"xoxb-", "AKIA", "ghp_", "AIza", "\\n\\r", strings.Repeat("1 ", 40),
		// the decoders and the own shapes
		`{\"k\":\"ghp_000000000000000000000000000000000000\"}`, "%", "%2", "%41%2B+a=b?c", `\u`, `\ud800\udc00`, `\ud83d`,
		"cG9zdGdyZXM6Ly9hOmJAYy9k", "-----BEGIN X-----\nQUJD\nRA==\n-----END X-----",
		"postgres://a:b@", "://", "?token=", "#access_token=abc&", "Authorization: Basic ", "Bearer ",
		"aws_secret_access_key=", "AKIAAAAAAAAAAAAAAAAA", "card 4111+1111+1111+1111", "ref 12 4111 1111 1111 1111 12",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		seen := map[string]bool{}
		for _, s := range d.Find(text) {
			if s == "" || !strings.Contains(text, s) || seen[s] {
				t.Fatalf("Find(%q) returned %q", text, s)
			}
			seen[s] = true
		}
	})
}
