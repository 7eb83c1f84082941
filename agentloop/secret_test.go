package agentloop_test

import (
	"strings"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestSecretsNeverLeave: on every provider, a tool returns a secret it
// declares (toolguard:"secret") and, in its text, a key nobody declared,
// which the guard's detector finds. The provider's next request, the audit
// log, the spans, the log lines and the transcript hold placeholders, never
// either value (frameworktest.Secrets, the check every entry point runs).
func TestSecretsNeverLeave(t *testing.T) {
	for _, name := range providers {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name, step{calls: []stepCall{{"call-1", frameworktest.VaultTool, frameworktest.VaultArguments}}}, step{text: "done"})
			s := frameworktest.NewSecrets(t)
			l := agentloop.New(f.model(), s.Tools, agentloop.Options{Store: s.Store, Guard: s.Options})
			res, err := l.Run(testCtx(t), frameworktest.SecretsUser, "rotate the billing key")
			if err != nil || res.Status != agentloop.StatusCompleted {
				t.Fatalf("run: %v, %v", res, err)
			}
			bodies, results := f.bodies(), f.results()
			if len(bodies) != 2 || len(results) != 2 || len(results[1]) != 1 {
				t.Fatalf("%d requests, results %v; want 2 and one result", len(bodies), results)
			}
			s.WantWithheld(t, map[string]string{
				"the model result":            string(results[1][0].Data),
				"the provider's next request": bodies[1],
			})
			for _, secret := range []string{frameworktest.DeclaredSecret, frameworktest.UndeclaredSecret} {
				if tr := res.Transcript.String(); len(tr) == 0 || strings.Contains(tr, secret) {
					t.Errorf("the transcript holds %q (or is empty)", secret)
				}
			}
		})
	}
}
