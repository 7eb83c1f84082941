package tgadk_test

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestSecretsNeverLeave: a guarded tool run by an ADK agent returns a
// declared secret and, in its text, a key nobody declared, which the
// guard's detector finds. The fake model's next request (the whole
// LLMRequest), the run's events, the audit log, the spans and the log
// lines hold neither value; the model is given the placeholders instead.
func TestSecretsNeverLeave(t *testing.T) {
	s := frameworktest.NewSecrets(t)
	a, err := tgadk.New(s.Guard, s.Tools, tgadk.Options{Options: host.Options{
		Principal: func(context.Context) (guard.Principal, error) { return frameworktest.SecretsUser, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeModel{}
	r := newRunner(t, a, m)
	var args map[string]any
	_ = json.Unmarshal([]byte(frameworktest.VaultArguments), &args)
	m.push(calls(&genai.FunctionCall{ID: "call-1", Name: frameworktest.VaultTool, Args: args}))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("rotate the billing key", genai.RoleUser))

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
	events, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	s.WantWithheld(t, map[string]string{
		"the function response the model was sent": string(response),
		"the model's next request":                 string(request),
		"the run's events":                         string(events),
	})
}
