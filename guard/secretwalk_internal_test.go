package guard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/canon"
)

// TestParseSecretPath: the path syntax, escapes included, and what it
// refuses.
func TestParseSecretPath(t *testing.T) {
	m := func(n string) step { return step{kind: stepMember, name: n} }
	each, members, text := step{kind: stepEach}, step{kind: stepMembers}, step{kind: stepText}
	idx := func(i int) step { return step{kind: stepIndex, index: i} }
	for p, want := range map[string][]step{
		"api_key":          {m("api_key")},
		"card.number":      {m("card"), m("number")},
		"links[].url":      {m("links"), each, m("url")},
		"accounts{}.key":   {m("accounts"), members, m("key")},
		"body#.token":      {m("body"), text, m("token")},
		"[].token":         {each, m("token")},
		"{}":               {members},
		"[3].extra.key":    {idx(3), m("extra"), m("key")},
		"a[2][]{}#.b":      {m("a"), idx(2), each, members, text, m("b")},
		`a\.b.c\[\]\#\\\{`: {m("a.b"), m(`c[]#\{`)},
		"#":                {text},
	} {
		got, err := parseSecretPath(p)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseSecretPath(%q) = %v, %v; want %v", p, got, err, want)
		}
	}
	for _, p := range []string{"", ".", "a.", ".a", "a..b", "a[", "a[x]", "a[-1]", "a[+1]", "a]", "a}", "a{", `a\`, "a.[]", "a[]b"} {
		if got, err := parseSecretPath(p); err == nil {
			t.Errorf("parseSecretPath(%q) = %v, want an error", p, got)
		}
	}
	// SecretMember escapes any name into one segment.
	for _, name := range []string{"plain", "a.b", "x[]", "{}", "#", `back\slash`, "", "ünï.cødé"} {
		steps, err := parseSecretPath("o." + SecretMember(name))
		if name == "" {
			continue // a member without a name cannot be named
		}
		if err != nil || len(steps) != 2 || steps[1] != m(name) {
			t.Errorf("SecretMember(%q): %v, %v", name, steps, err)
		}
	}
}

// sekret is the test detector: "SEKRET-" and the letters and digits after
// it.
type sekret struct{}

var sekretRE = regexp.MustCompile(`SEKRET-[a-z0-9]+`)

func (sekret) Find(text string) []string { return sekretRE.FindAllString(text, -1) }

// panics is a detector that panics.
type panics struct{}

func (panics) Find(string) []string { panic("no") }

// findsText is a detector that finds one text.
type findsText string

func (f findsText) Find(text string) []string {
	if strings.Contains(text, string(f)) {
		return []string{string(f)}
	}
	return nil
}

// TestRedactIsTheTreeRedaction: the one-pass walk over the JSON text does
// what redacting the parsed tree does (the reference below, written the
// slow and obvious way), for random values, random paths into them (by
// name, index, each element and each member) and a detector, and leaves
// every byte it does not replace as it was.
func TestRedactIsTheTreeRedaction(t *testing.T) {
	r := NewRedactor([]byte("k"), sekret{})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		v := randomValue(rng, 0)
		text := randomSpelling(rng, v)
		paths := randomPaths(rng, v)
		c := compilePaths(paths)
		if c.err != nil {
			t.Fatalf("paths %q: %v", paths, c.err)
		}
		got := r.redact([]byte(text), c.paths, roots(c.paths), r.placeholderJSON)
		want := referenceRedact(r, c.paths, roots(c.paths), v)
		var gotTree any
		d := json.NewDecoder(strings.NewReader(string(got)))
		d.UseNumber()
		if err := d.Decode(&gotTree); err != nil {
			t.Fatalf("case %d: %s is not JSON: %v", i, got, err)
		}
		if !reflect.DeepEqual(numbersCanonical(gotTree), numbersCanonical(want)) {
			t.Fatalf("case %d: paths %q over %s\n got %s\nwant %s", i, paths, text, got, canon.AppendValue(nil, want))
		}
		if sekretRE.Match(got) {
			t.Fatalf("case %d: %s holds a secret", i, got)
		}
		if string(got) == text && !reflect.DeepEqual(numbersCanonical(v), numbersCanonical(want)) {
			t.Fatalf("case %d: nothing replaced", i)
		}
	}
}

func numbersCanonical(v any) any {
	switch t := v.(type) {
	case json.Number:
		c, _, err := canon.Parse([]byte(t), canon.Limits{})
		if err != nil {
			panic(err)
		}
		return json.Number(c)
	case map[string]any:
		out := map[string]any{}
		for k, m := range t {
			out[k] = numbersCanonical(m)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, m := range t {
			out[i] = numbersCanonical(m)
		}
		return out
	}
	return v
}

var names = []string{"a", "b", "key", "a.b", "x[]", "{}", "#", `\`, "SEKRET-k1", "ü"}

func randomValue(rng *rand.Rand, depth int) any {
	n := rng.IntN(10)
	if depth > 3 {
		n = 5 + rng.IntN(5)
	}
	switch n {
	case 0, 1:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[names[rng.IntN(len(names))]] = randomValue(rng, depth+1)
		}
		return m
	case 2, 3:
		var l []any
		for range rng.IntN(4) {
			l = append(l, randomValue(rng, depth+1))
		}
		if l == nil {
			l = []any{}
		}
		return l
	case 4:
		return nil
	case 5:
		return json.Number([]string{"0", "-1.5", "4111111111111111", "1e3", "12"}[rng.IntN(5)])
	case 6:
		return rng.IntN(2) == 0
	default:
		return []string{"", "plain", "the key is SEKRET-abc1, keep it", `quote " and \ and ` + "\n\u2028",
			"SEKRET-x SEKRET-y SEKRET-x", "ünïcödé SEKRET-u"}[rng.IntN(6)]
	}
}

// randomSpelling writes v as JSON with random white space and escapes, so
// that the walk's offsets are tried against every spelling.
func randomSpelling(rng *rand.Rand, v any) string {
	var b strings.Builder
	ws := func() {
		b.WriteString([]string{"", "", " ", "\n\t "}[rng.IntN(4)])
	}
	str := func(s string) {
		// A detector reads JSON text (secretscan undoes its escapes); the
		// test's does not, so its finds are never escaped.
		if rng.IntN(3) > 0 || strings.Contains(s, "SEKRET") {
			b.Write(canon.AppendString(nil, s))
			return
		}
		b.WriteByte('"')
		for _, c := range s {
			if c < 0x10000 && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.Write(canon.AppendString(nil, string(c))[1 : len(canon.AppendString(nil, string(c)))-1])
			}
		}
		b.WriteByte('"')
	}
	var write func(v any)
	write = func(v any) {
		ws()
		switch t := v.(type) {
		case map[string]any:
			b.WriteByte('{')
			i := 0
			for k, m := range t {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				str(k)
				ws()
				b.WriteByte(':')
				write(m)
				i++
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, m := range t {
				if i > 0 {
					b.WriteByte(',')
				}
				write(m)
			}
			ws()
			b.WriteByte(']')
		case string:
			str(t)
		case json.Number:
			b.WriteString(string(t))
		case bool:
			b.WriteString(strconv.FormatBool(t))
		case nil:
			b.WriteString("null")
		}
		ws()
	}
	write(v)
	return b.String()
}

// randomPaths picks up to three places in v and names each by a path
// whose steps are, at random, the place's own or a wildcard.
func randomPaths(rng *rand.Rand, v any) []string {
	var out []string
	for range rng.IntN(4) {
		var b strings.Builder
		cur, first := v, true
		for steps := 0; ; steps++ {
			if steps > 0 && rng.IntN(3) == 0 {
				break
			}
			switch t := cur.(type) {
			case map[string]any:
				if len(t) == 0 {
					goto done
				}
				var k string
				for k = range t {
					break
				}
				if rng.IntN(3) == 0 {
					b.WriteString("{}")
				} else {
					if !first {
						b.WriteByte('.')
					}
					b.WriteString(SecretMember(k))
				}
				cur = t[k]
			case []any:
				if len(t) == 0 {
					goto done
				}
				i := rng.IntN(len(t))
				if rng.IntN(2) == 0 {
					b.WriteString("[]")
				} else {
					fmt.Fprintf(&b, "[%d]", i)
				}
				cur = t[i]
			default:
				goto done
			}
			first = false
		}
	done:
		if b.Len() > 0 {
			out = append(out, b.String())
		}
	}
	return out
}

// referenceRedact is the redaction of a parsed tree, the obvious way.
func referenceRedact(r *Redactor, paths [][]step, states []state, v any) any {
	if len(states) > 0 && accepts(paths, states) {
		if v == nil || v == "" {
			return v
		}
		c, _, err := canon.Parse(canon.AppendValue(nil, v), canon.Limits{})
		if err != nil {
			panic(err)
		}
		return SecretPlaceholder(secretHash(r.key, c))
	}
	detect := func(s string) string {
		out, _ := r.replace(s, sekret{}.Find(s))
		return out
	}
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, m := range t {
			out[detect(k)] = referenceRedact(r, paths, advance(paths, states, k, -1), m)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, m := range t {
			out[i] = referenceRedact(r, paths, advance(paths, states, "", i), m)
		}
		return out
	case string:
		return detect(t)
	case json.Number:
		if s := detect(string(t)); s != string(t) {
			return s
		}
	}
	return v
}

// TestRedactJSONText: a string a path declares to hold JSON text (#) is
// walked inside, and written again with its secrets withheld; text that
// is not JSON is withheld whole.
func TestRedactJSONText(t *testing.T) {
	r := NewRedactor([]byte("k"), sekret{})
	c := compilePaths([]string{"body#.token", "list[]#[].token"})
	ph := func(v string) string { return SecretPlaceholder(secretHash(r.key, canon.AppendString(nil, v))) }
	for in, want := range map[string]string{
		`{"body":"{\"token\":\"abc\",\"n\":\"SEKRET-z\"}"}`: `{"body":` + string(canon.AppendString(nil, `{"token":"`+ph("abc")+`","n":"`+ph("SEKRET-z")+`"}`)) + `}`,
		`{"body":"not json, token abc"}`:                    `{"body":"` + ph("not json, token abc") + `"}`,
		`{"body":""}`:                                       `{"body":""}`,
		`{"body":"{\"other\":1}"}`:                          `{"body":"{\"other\":1}"}`,
		`{"list":["[{\"token\":7}]"]}`:                      `{"list":[` + string(canon.AppendString(nil, `[{"token":"`+SecretPlaceholder(secretHash(r.key, []byte("7")))+`"}]`)) + `]}`,
	} {
		if got := r.redact([]byte(in), c.paths, roots(c.paths), r.placeholderJSON); string(got) != want {
			t.Errorf("redact(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}

// TestRedactInvalidWithheldWhole: output the walk must read (a path
// declares a secret, or the detector found one) and cannot read as one JSON
// value is withheld whole, never passed on as it is. Output in which
// nothing is declared or found is not walked, valid or not.
func TestRedactInvalidWithheldWhole(t *testing.T) {
	r := NewRedactor([]byte("k"), sekret{})
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, in := range []string{`{"a":"SEKRET-1"`, "\"\xff SEKRET-3\"", `{} {"a":"SEKRET-4"}`, `SEKRET-5`, `["SEKRET-6",]`} {
		if got, want := r.output("t", nil, nil, []byte(in)), r.whole([]byte(in)); string(got) != string(want) || !json.Valid(got) {
			t.Errorf("found, output(%.40q) = %.80s, want it withheld whole", in, got)
		}
	}
	for _, in := range []string{deep, `[1,]`, `{"a":1`, "\"\xff\""} {
		if got, want := r.output("t", []string{"a"}, nil, []byte(in)), r.whole([]byte(in)); string(got) != string(want) || !json.Valid(got) {
			t.Errorf("declared, output(%.40q) = %.80s, want it withheld whole", in, got)
		}
		if got := r.output("t", nil, nil, []byte(in)); string(got) != in {
			t.Errorf("nothing to withhold, output(%.40q) = %.80s, want it as it is", in, got)
		}
	}
	// A find the walk cannot replace (across two strings) withholds the
	// whole output.
	if got := r.output("t", nil, nil, []byte(`["x SEKRET-a","b"]`)); !strings.Contains(string(got), "[secret withheld") {
		t.Errorf("walk: %s", got)
	}
	// A detector that panics finds everything it is asked about: every
	// name and string is withheld.
	if got := string(NewRedactor([]byte("k"), panics{}).output("t", nil, nil, []byte(`{"name-x":["value-x",7]}`))); !json.Valid([]byte(got)) ||
		strings.Contains(got, "name-x") || strings.Contains(got, "value-x") || strings.Contains(got, "7") && !strings.Contains(got, "[secret withheld") {
		t.Errorf("a panicking detector: %s", got)
	}
	across := NewRedactor([]byte("k"), findsText(`SEKRET-a","b`))
	if got, want := across.output("t", nil, nil, []byte(`["x SEKRET-a","b"]`)), across.whole([]byte(`["x SEKRET-a","b"]`)); string(got) != string(want) {
		t.Errorf("a find across strings: %s", got)
	}
	// A name given twice: both members are withheld, whichever a reader
	// keeps.
	c := compilePaths([]string{"a"})
	if got := string(r.redact([]byte(`{"a":"x1","a":"x2","b":"SEKRET-2","b":"SEKRET-3"}`), c.paths, roots(c.paths), r.placeholderJSON)); strings.Contains(got, "x1") ||
		strings.Contains(got, "x2") || strings.Contains(got, "SEKRET") {
		t.Errorf("duplicate names: %s", got)
	}
	// Paths that do not parse withhold the whole output too.
	if got := r.output("t", []string{"a..b"}, nil, []byte(`{"a":1}`)); string(got) != string(r.whole([]byte(`{"a":1}`))) {
		t.Errorf("bad declared path: %s", got)
	}
	if got := r.output("t", nil, []string{"a["}, []byte(`{"a":1}`)); string(got) != string(r.whole([]byte(`{"a":1}`))) {
		t.Errorf("bad run-time path: %s", got)
	}
}
