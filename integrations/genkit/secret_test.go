package tggenkit_test

import (
	"encoding/json"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestSecretsNeverLeave: a guarded tool run by a Genkit generation returns
// a declared secret and, in its text, a key nobody declared, which the
// guard's detector finds. The scripted model's next request (the whole
// ModelRequest), the response's history, the audit log, the spans and the
// log lines hold neither value; the tool response the model is given
// holds the placeholders instead.
func TestSecretsNeverLeave(t *testing.T) {
	s := frameworktest.NewSecrets(t)
	gd, err := tggenkit.New(s.Guard, s.Tools, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &script{}
	gk := newGenkit(t.Context(), m)
	var args map[string]any
	_ = json.Unmarshal([]byte(frameworktest.VaultArguments), &args)
	m.push(calls(&ai.ToolRequest{Name: frameworktest.VaultTool, Ref: "call-1", Input: args}))
	resp, err := generate(session(frameworktest.SecretsUser, "session-secret"), gk, gd, ai.WithPrompt("rotate the billing key"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "done" {
		t.Fatalf("generation ended %q (%s)", resp.Text(), resp.FinishReason)
	}
	m.mu.Lock()
	n := len(m.requests)
	m.mu.Unlock()
	if n != 2 {
		t.Fatalf("the model got %d requests, want 2", n)
	}
	sent := seenByModel(m, "call-1")
	if len(sent) != 1 {
		t.Fatalf("the model's next request holds %d responses to call-1, want 1", len(sent))
	}
	response, _ := json.Marshal(sent[0])
	request, err := json.Marshal(m.lastRequest())
	if err != nil {
		t.Fatal(err)
	}
	history, err := json.Marshal(resp.History())
	if err != nil {
		t.Fatal(err)
	}
	s.WantWithheld(t, map[string]string{
		"the tool response the model was sent": string(response),
		"the model's next request":             string(request),
		"the response's history":               string(history),
	})
}
