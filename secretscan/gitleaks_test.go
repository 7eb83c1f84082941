package secretscan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/toolguard/toolguard/secretscan"
)

// TestSameAsGitleaks: running each rule only in windows around its
// keywords finds what gitleaks' own detector finds over the whole text
// with the same rules (the defaults less generic-api-key and the rules of
// file paths), over texts that hold every shape amid prose full of
// keywords, on one line and on many, and over the benchmark's output.
func TestSameAsGitleaks(t *testing.T) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		t.Fatal(err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		t.Fatal(err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range cfg.Rules {
		if id == "generic-api-key" || r.Path != nil || r.Regex == nil {
			delete(cfg.Rules, id)
		}
	}
	ref := detect.NewDetector(cfg)
	d := newDetector(t, secretscan.Options{NoCards: true})

	var texts []string
	var all []string
	for _, s := range shapes() {
		all = append(all, s) // card numbers too: neither finds them here
	}
	prose := "They said the API key and the access token expired; the password was reset and the auth service is at https://auth.example.com/v1/token?next_page=2. "
	texts = append(texts, string(ticketsJSON(4096)), prose+strings.Join(all, " "+prose)+prose)
	texts = append(texts, strings.ReplaceAll(texts[1], " ", "\n"), strings.Join(all, `","`))
	for _, text := range texts {
		var want []string
		for _, f := range ref.DetectString(text) {
			if !slices.Contains(want, f.Secret) {
				want = append(want, f.Secret)
			}
		}
		got := d.Find(text)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("text %.60q…:\nFind     %q\ngitleaks %q", text, got, want)
		}
	}
}
