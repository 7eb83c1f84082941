package tgeino_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// A remote MCP server's tools, imported by adapters/mcp, run in Eino's
// ToolsNode behind the guard: the server's schema is checked before
// anything is sent, and a write repeated in the scope runs once.
func TestMCPToolsInEino(t *testing.T) {
	ctx := context.Background()
	ct, notes := frameworktest.NotesServer(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "eino", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	remote, err := tgmcp.Import(ctx, cs, tgmcp.ImportOptions{
		Authorize:  func(context.Context, string, *guard.Invocation) error { return nil },
		NoApproval: func(*mcp.Tool) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	set, err := remote.Set()
	if err != nil {
		t.Fatal(err)
	}
	eg, err := tgeino.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), set, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := toolsGraph(t, eg.ToolsNodeConfig())
	ctx = host.WithScope(host.WithPrincipal(ctx, acme), "run-mcp")
	for _, c := range []struct {
		id, args string
		want     guard.Code
	}{
		{"bad", `{"text":42}`, guard.CodeInvalidArguments},
		{"n1", `{"text":"buy milk"}`, guard.CodeOK},
		{"n2", `{"text":"buy milk"}`, guard.CodeOK}, // the model's repeat: a replay
	} {
		out, err := run.Invoke(ctx, toolCalls([3]string{c.id, "add_note", c.args}))
		if err != nil {
			t.Fatal(err)
		}
		if r := results(t, out)[c.id]; r.Code != c.want {
			t.Errorf("%s: %s %s, want %s", c.id, r.Code, r.Message, c.want)
		}
	}
	if n := notes.Load(); n != 1 {
		t.Errorf("the server added %d notes, want 1", n)
	}
}
