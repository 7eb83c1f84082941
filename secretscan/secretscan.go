// Package secretscan finds the secrets a tool did not declare in the text
// of its output: provider API keys (OpenAI, Anthropic, AWS, GitHub, Google,
// Slack, Stripe and some two hundred more), private keys, JWTs, AWS secret
// access keys, passwords in URLs, tokens in URL queries, Authorization
// values, and card numbers. A *Detector is a guard.Detector: give it to
// guard.Options.Detector and the guard withholds what it finds, in every
// tool output and receipt, with the same keyed placeholder as a declared
// secret.
//
//	d, err := secretscan.New(secretscan.Options{})
//	g := guard.New(set, store, guard.Options{Detector: d, SecretKey: key})
//
// The patterns are gitleaks' default rules (github.com/zricethezav/gitleaks/v8,
// its config/gitleaks.toml, some 220 of them), each run by a gitleaks
// detector of its own: its secret group, entropy threshold, allowlists and
// stop words drop placeholders, test values and words as gitleaks does.
// Left out are generic-api-key, unless Options.Generic (see there), and
// the rules about file paths (a .p12 file, a Terraform file), since an
// output has no path. The shapes gitleaks has no rule for are this
// package's own (shapes.go, cards.go).
//
// A secret is found wherever it sits (docs/secrets.md, "Detected
// secrets"): whatever punctuation closes it (scan.go), and through JSON
// escapes, percent-encoding and base64, up to four layers (decode.go);
// what Find returns stands in the text as it is, encoded where the secret
// is, so that replacing it leaves no form of the secret. Find makes one
// pass over the text (find.go, keywords.go) and runs each rule only near
// its keywords. The tests use the shared corpus of internal/secretcorpus.
//
// The package is a module of its own so that the core module's users never
// download gitleaks and what it pulls in (viper, archive readers, a
// terminal styler).
package secretscan

import (
	"errors"
	"fmt"
	stdregexp "regexp"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	glregexp "github.com/zricethezav/gitleaks/v8/regexp"

	"github.com/toolguard/toolguard/guard"
)

// Options configures a Detector. The zero value means gitleaks' default
// rules but generic-api-key, and card numbers.
type Options struct {
	// Generic adds gitleaks' generic-api-key rule: a random-looking value
	// assigned to a name like key, token, secret or password in the same
	// text ("DB_PASSWORD=…", "api_token: …"), whatever its shape. It is
	// off by default because it is slow where prose says such words (its
	// expression runs over nearly all of the text, some 700 ns a byte:
	// milliseconds for a few KB), and because the guard asks about each
	// string of an output apart from its member names, so that it sees
	// names only in text such as a config file or a log line; a member
	// that holds a secret is declared instead (toolguard:"secret").
	Generic bool
	// Rules are patterns of the host's own, run beside the default rules
	// (an internal token format, a partner's key).
	Rules []Rule
	// Disable names default rules to leave out, by gitleaks id (as
	// "jwt"). An id that is no default rule is an error.
	Disable []string
	// NoCards turns off card numbers.
	NoCards bool
}

// Rule is a pattern of the host's own.
type Rule struct {
	// ID names the rule; it must differ from the default rules' ids and
	// from the other rules'.
	ID string
	// Regex is the pattern, in Go's regexp syntax. Where it has capture
	// groups, the secret is SecretGroup's text (the first non-empty group
	// when SecretGroup is 0), and the rest of the match is left in place;
	// else the secret is the whole match.
	Regex string
	// SecretGroup picks the capture group that is the secret.
	SecretGroup int
	// Keywords, when given, are words one of which (in any case) a match
	// holds: the rule then runs only around them, which is fast. Without
	// keywords it runs over the whole of every text.
	Keywords []string
	// Entropy, when above zero, is the Shannon entropy (bits per
	// character) that a secret must exceed: "password" is not one.
	Entropy float64
}

// Detector finds secrets in text (guard.Detector). It is safe for
// concurrent use.
type Detector struct {
	rules       []*rule // the rules with keywords
	keywordless []*rule // the rules without: they run over every text
	ac          *automaton
	kwRules     [][]int32 // by keyword: the rules it wakes
	kwOwn       [][]own   // by keyword: the own shapes it wakes
	keywords    []string  // the automaton's, by index
	cards       bool
}

var _ guard.Detector = (*Detector)(nil)

// genericRule is gitleaks' rule of values assigned to secret-like names.
const genericRule = "generic-api-key"

// defaults is gitleaks' default configuration, read once: viper, which
// reads it, keeps global state, and the regular expressions compile once.
var defaults = sync.OnceValues(func() (config.Config, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		return config.Config{}, err
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return config.Config{}, err
	}
	return vc.Translate()
})

// New returns a Detector of gitleaks' default rules less generic-api-key
// (unless opts.Generic) and opts.Disable, plus opts.Rules and, unless
// opts.NoCards, card numbers. It fails on a rule that does not compile or
// whose id is taken, or an unknown id in Disable.
func New(opts Options) (*Detector, error) {
	base, err := defaults()
	if err != nil {
		return nil, fmt.Errorf("secretscan: gitleaks' default rules: %w", err)
	}
	rules := make(map[string]config.Rule, len(base.Rules)+len(opts.Rules))
	for id, r := range base.Rules {
		rules[id] = r
	}
	if !opts.Generic {
		delete(rules, genericRule)
	}
	for _, id := range opts.Disable {
		if _, ok := base.Rules[id]; !ok {
			return nil, fmt.Errorf("secretscan: Disable: no rule %q", id)
		}
		delete(rules, id)
	}
	for _, r := range opts.Rules {
		rule, err := r.compile()
		if err != nil {
			return nil, err
		}
		if _, ok := base.Rules[rule.RuleID]; ok {
			return nil, fmt.Errorf("secretscan: rule %q: the id is taken", r.ID)
		}
		if _, ok := rules[rule.RuleID]; ok {
			return nil, fmt.Errorf("secretscan: rule %q: the id is taken", r.ID)
		}
		rules[rule.RuleID] = rule
	}
	ids := make([]string, 0, len(rules))
	for id, r := range rules {
		// A rule of file paths (a .p12 file, a Terraform password in a
		// .tf file) never applies to a tool's output, which has no path.
		if r.Regex != nil && r.Path == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	d := &Detector{cards: !opts.NoCards}
	var keywords []string
	index := map[string]int{}
	keyword := func(k string) int {
		k = strings.ToLower(k)
		i, ok := index[k]
		if !ok {
			i = len(keywords)
			index[k] = i
			keywords = append(keywords, k)
			d.kwRules, d.kwOwn = append(d.kwRules, nil), append(d.kwOwn, nil)
		}
		return i
	}
	for _, id := range ids {
		r := rules[id]
		if len(r.Keywords) == 0 {
			d.keywordless = append(d.keywordless, newRule(r, base.Allowlists))
			continue
		}
		d.rules = append(d.rules, newRule(r, base.Allowlists))
		for _, k := range lowerKeywords(r.Keywords) {
			i := keyword(k)
			d.kwRules[i] = append(d.kwRules[i], int32(len(d.rules)-1))
		}
	}
	for _, o := range []own{ownAWSID, ownAWSName, ownURL, ownQuery, ownAuth, ownCard} {
		if o == ownCard && opts.NoCards {
			continue
		}
		for _, k := range ownKeywords[o] {
			i := keyword(k)
			d.kwOwn[i] = append(d.kwOwn[i], o)
		}
	}
	d.ac = newAutomaton(keywords)
	d.keywords = keywords
	return d, nil
}

// keyword returns the i-th keyword of the automaton.
func (d *Detector) keyword(i int) string { return d.keywords[i] }
func (r Rule) compile() (config.Rule, error) {
	if strings.TrimSpace(r.ID) == "" {
		return config.Rule{}, errors.New("secretscan: a rule has no id")
	}
	re, err := stdregexp.Compile(r.Regex)
	if err != nil {
		return config.Rule{}, fmt.Errorf("secretscan: rule %q: %w", r.ID, err)
	}
	if r.Regex == "" {
		return config.Rule{}, fmt.Errorf("secretscan: rule %q has no regex", r.ID)
	}
	if r.SecretGroup < 0 || r.SecretGroup > re.NumSubexp() {
		return config.Rule{}, fmt.Errorf("secretscan: rule %q: SecretGroup %d of %d groups", r.ID, r.SecretGroup, re.NumSubexp())
	}
	kw := make([]string, 0, len(r.Keywords))
	for _, k := range r.Keywords {
		if k != "" {
			kw = append(kw, strings.ToLower(k))
		}
	}
	return config.Rule{
		RuleID:      r.ID,
		Description: "secretscan.Options.Rules",
		Regex:       glregexp.MustCompile(r.Regex), // it compiled above
		SecretGroup: r.SecretGroup,
		Keywords:    kw,
		Entropy:     r.Entropy,
		Tags:        []string{},
	}, nil
}
