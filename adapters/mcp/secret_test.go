package tgmcp_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestSecretsNeverLeave: a tool served over MCP returns a declared secret
// and, in its text, a key nobody declared, which the guard's detector
// finds. The tools/call answer the MCP client receives (its text content
// and its structured content), the audit log, the spans and the log lines
// hold neither value; the client is given the placeholders instead.
func TestSecretsNeverLeave(t *testing.T) {
	s := frameworktest.NewSecrets(t)
	p := frameworktest.SecretsUser
	srv, err := tgmcp.NewServer(s.Guard, s.Tools, tgmcp.Options{Principal: &p})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{server: srv}
	cs := w.connect(t, nil)
	var args map[string]any
	_ = json.Unmarshal([]byte(frameworktest.VaultArguments), &args)
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: frameworktest.VaultTool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || len(r.Content) != 1 {
		t.Fatalf("answer: isError %t, %d contents", r.IsError, len(r.Content))
	}
	text, ok := r.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", r.Content[0])
	}
	structured, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	s.WantWithheld(t, map[string]string{
		"the answer's text":               text.Text,
		"the answer's structured content": string(structured),
		"the whole answer":                string(whole),
	})
}
