package secretcorpus_test

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/secretcorpus"
)

// TestCorpusSize: the bounds: at least 15 shapes, the 12
// contexts, every pair once, at least 1,000 distinct look-alikes.
func TestCorpusSize(t *testing.T) {
	shapes, ctxs, cases := secretcorpus.Shapes(), secretcorpus.Contexts(), secretcorpus.Cases()
	if len(shapes) < 15 || len(ctxs) != 12 {
		t.Fatalf("%d shapes, %d contexts", len(shapes), len(ctxs))
	}
	if len(cases) != len(shapes)*len(ctxs) {
		t.Fatalf("%d cases, want %d", len(cases), len(shapes)*len(ctxs))
	}
	for i, c := range cases {
		if c.Shape != shapes[i/len(ctxs)] || c.Context != ctxs[i%len(ctxs)] {
			t.Fatalf("case %d is %s/%s", i, c.Shape, c.Context)
		}
	}
	la := secretcorpus.LookAlikes()
	seen := map[string]bool{}
	for _, l := range la {
		if seen[l.Text] {
			t.Errorf("look-alike %q twice", l.Text)
		}
		seen[l.Text] = true
	}
	if len(la) < 1000 {
		t.Errorf("%d look-alikes", len(la))
	}
	t.Logf("%d shapes × %d contexts = %d cases; %d look-alikes", len(shapes), len(ctxs), len(cases), len(la))
}

// TestCorpusStable: the same corpus on every call, and a caller's changes
// to what it got do not reach the next caller.
func TestCorpusStable(t *testing.T) {
	a, b := secretcorpus.Cases(), secretcorpus.Cases()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Cases differ between calls")
	}
	a[0].Forms[0], a[0].Secrets[0] = "x", "x"
	if c := secretcorpus.Cases(); c[0].Forms[0] == "x" || c[0].Secrets[0] == "x" {
		t.Fatal("a caller changed the corpus")
	}
	if !reflect.DeepEqual(secretcorpus.LookAlikes(), secretcorpus.LookAlikes()) {
		t.Fatal("LookAlikes differ between calls")
	}
}

// TestCasesHoldTheirSecrets: each case's text, decoded as its context
// says (JSON once or twice, the URL query, percent-decoding once or
// twice, base64, XML, CSV, a wrapped base64 body, escaped line breaks),
// holds every raw secret; its forms are substrings of its text; and the
// text with its forms replaced holds none of them, in no encoding, by
// Leak.
func TestCasesHoldTheirSecrets(t *testing.T) {
	for _, c := range secretcorpus.Cases() {
		name := c.Shape + "/" + string(c.Context)
		if len(c.Secrets) == 0 || len(c.Forms) == 0 {
			t.Errorf("%s: %d secrets, %d forms", name, len(c.Secrets), len(c.Forms))
			continue
		}
		decoded := decode(t, c)
		for _, s := range c.Secrets {
			if !strings.Contains(decoded, s) {
				t.Errorf("%s: the decoded text does not hold %q:\n%s", name, s, decoded)
			}
		}
		redacted := c.Text
		for _, f := range c.Forms {
			if !strings.Contains(c.Text, f) {
				t.Errorf("%s: form %q is not in the text", name, f)
			}
			redacted = strings.ReplaceAll(redacted, f, "[withheld]")
		}
		if p, ok := c.Leak(c.Text); !ok {
			t.Errorf("%s: Leak finds nothing in the case's own text", name)
		} else if !strings.Contains(c.Text, p) {
			t.Errorf("%s: Leak returned %q, not in the text", name, p)
		}
		if p, ok := c.Leak(redacted); ok {
			t.Errorf("%s: %q left after replacing the forms:\n%s", name, p, redacted)
		}
		want := secretcorpus.InValue
		switch c.Context {
		case secretcorpus.MapKey:
			want = secretcorpus.AsMapKey
		case secretcorpus.ErrorMessage:
			want = secretcorpus.AsError
		}
		if c.Where != want {
			t.Errorf("%s: Where = %s", name, c.Where)
		}
	}
}

// TestLeakFindsPieces: Leak finds a piece of a secret as short as
// Fragment, and its JSON-escaped form, and not a placeholder.
func TestLeakFindsPieces(t *testing.T) {
	for _, c := range secretcorpus.Cases() {
		if c.Context != secretcorpus.Plain {
			continue
		}
		s := c.Secrets[len(c.Secrets)-1]
		if len(s) < secretcorpus.Fragment {
			t.Fatalf("%s: secret %q shorter than a fragment", c.Shape, s)
		}
		piece := s[len(s)-secretcorpus.Fragment:]
		if _, ok := c.Leak("… " + piece + " …"); !ok {
			t.Errorf("%s: Leak misses %q", c.Shape, piece)
		}
		j, _ := json.Marshal(map[string]string{"text": c.Text})
		if _, ok := c.Leak(string(j)); !ok {
			t.Errorf("%s: Leak misses the text written as JSON", c.Shape)
		}
		if p, ok := c.Leak(`{"text":"the key is [secret withheld; hmac-sha256:0aa0f5650b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80910]"}`); ok {
			t.Errorf("%s: Leak flags a placeholder: %q", c.Shape, p)
		}
	}
}

// TestLookAlikesHoldNoCorpusSecret: no look-alike holds a piece of a
// case's secret (a look-alike flagged is a false positive, never a find).
func TestLookAlikesHoldNoCorpusSecret(t *testing.T) {
	var all strings.Builder
	for _, l := range secretcorpus.LookAlikes() {
		if l.Kind == "" || l.Text == "" {
			t.Fatalf("look-alike %+v", l)
		}
		all.WriteString(l.Text + "\n")
	}
	for _, c := range secretcorpus.Cases() {
		if p, ok := c.Leak(all.String()); ok {
			t.Errorf("%s/%s: a look-alike holds %q", c.Shape, c.Context, p)
		}
	}
}

var (
	b64run  = regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`)
	pemBody = regexp.MustCompile(`(?s)(?:-----BEGIN SETTINGS-----\n|\r\n\r\n)(.*?)(?:\n-----END|\r\n$)`)
)

// decode undoes c's context, by the standard library's decoders, and
// then the percent-encoding of a password in a URL.
func decode(t *testing.T, c secretcorpus.Case) string {
	t.Helper()
	d := undo(t, c)
	if s, err := url.PathUnescape(d); err == nil {
		return d + "\n" + s
	}
	return d
}

func undo(t *testing.T, c secretcorpus.Case) string {
	t.Helper()
	text := c.Text
	switch c.Context {
	case secretcorpus.JSONInString:
		var v struct{ Body string }
		must(t, json.Unmarshal([]byte(text), &v))
		return jsonValues(t, v.Body)
	case secretcorpus.JSONTwice:
		var v struct{ Payload string }
		must(t, json.Unmarshal([]byte(text), &v))
		var inner string
		must(t, json.Unmarshal([]byte(v.Payload), &inner))
		return jsonValues(t, inner)
	case secretcorpus.URLQuery:
		u, err := url.Parse(text)
		must(t, err)
		return strings.Join(values(u.Query()), "\n")
	case secretcorpus.PercentEncoded:
		u, err := url.Parse(text)
		must(t, err)
		return strings.Join(values(u.Query()), "\n")
	case secretcorpus.Base64:
		return b64(t, b64run.FindString(text))
	case secretcorpus.XML:
		d := xml.NewDecoder(strings.NewReader(text))
		var b strings.Builder
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			if cd, ok := tok.(xml.CharData); ok {
				b.Write(cd)
				b.WriteString("\n")
			}
		}
		return b.String()
	case secretcorpus.CSV:
		rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
		must(t, err)
		return strings.Join(rows[1], "\n")
	case secretcorpus.PEMSplit:
		if strings.HasPrefix(text, "PRIVATE_KEY=") {
			return strings.ReplaceAll(text, `\n`, "\n")
		}
		m := pemBody.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no body in %q", c.Shape, text)
		}
		return b64(t, strings.NewReplacer("\r", "", "\n", "").Replace(m[1]))
	}
	return text // plain, quoted, map key, error message
}

// jsonValues is the string values of a JSON object, one a line.
func jsonValues(t *testing.T, doc string) string {
	t.Helper()
	var m map[string]string
	must(t, json.Unmarshal([]byte(doc), &m))
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return strings.Join(out, "\n")
}

func values(q url.Values) []string {
	var out []string
	for _, vs := range q {
		for _, v := range vs {
			out = append(out, v)
			if u, err := url.Parse(v); err == nil {
				out = append(out, values(u.Query())...)
			}
		}
	}
	return out
}

func b64(t *testing.T, s string) string {
	t.Helper()
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return string(b)
		}
	}
	t.Fatalf("not base64: %q", s)
	return ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
