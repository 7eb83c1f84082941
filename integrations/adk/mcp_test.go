package tgadk_test

import (
	"context"
	"testing"

	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/tool/mcptoolset"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// TestImportedMCPToolset: the tools an ADK mcptoolset lists from an MCP
// server run behind the guard: the server's schema is checked before
// anything is sent, its write needs approval (ADK's confirmation) and runs
// once, and its read runs freely.
func TestImportedMCPToolset(t *testing.T) {
	ct, notes := frameworktest.NotesServer(t)
	mts, err := mcptoolset.New(mcptoolset.Config{Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tgadk.ImportToolset(mts, func(name string) host.ImportOptions {
		return host.ImportOptions{Read: name == "count_notes",
			Authorize: func(context.Context, string, *guard.Invocation) error { return nil }}
	})
	if err != nil {
		t.Fatal(err)
	}
	set := toolset.MustNew()
	signer, _ := guard.NewSigner(key)
	g := guard.New(tgadk.Join(set, ts), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	a, err := tgadk.New(g, set, tgadk.Options{Toolsets: []*tgadk.Toolset{ts},
		Options: host.Options{Signer: signer, Principal: byUser}})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeModel{}
	r := newRunnerFor(t, a, llmagent.Config{Model: m, Tools: a.Tools(), Toolsets: a.Toolsets()})
	add := func(id string, text any) *genai.FunctionCall {
		return &genai.FunctionCall{ID: id, Name: "add_note", Args: map[string]any{"text": text}}
	}

	m.push(calls(add("bad", 42)))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("note 42", genai.RoleUser))
	if res := result(t, evs, "bad"); res.Code != guard.CodeInvalidArguments {
		t.Errorf("bad = %s, want INVALID_ARGUMENTS", res)
	}
	m.push(calls(add("n1", "buy milk")))
	evs = run(t, r, "user-1", "s1", genai.NewContentFromText("note: buy milk", genai.RoleUser))
	fc := confirmationCall(evs)
	if fc == nil {
		t.Fatal("the remote write did not ask for approval")
	}
	if n := notes.Load(); n != 0 {
		t.Fatalf("notes before approval = %d, want 0", n)
	}
	evs = run(t, r, "user-1", "s1", confirm(fc, true))
	if res := result(t, evs, "n1"); res.Code != guard.CodeOK {
		t.Fatalf("approved add_note = %s, want OK", res)
	}
	m.push(calls(add("n2", "buy milk"), &genai.FunctionCall{ID: "c1", Name: "count_notes", Args: map[string]any{}}))
	evs = run(t, r, "user-1", "s1", genai.NewContentFromText("again, and count", genai.RoleUser))
	if res := result(t, evs, "n2"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("repeated add_note = %s, want a replay", res)
	}
	if res := result(t, evs, "c1"); res.Code != guard.CodeOK {
		t.Errorf("count_notes = %s, want OK", res)
	}
	if n := notes.Load(); n != 1 {
		t.Errorf("notes = %d, want 1", n)
	}
	offered := map[string]bool{}
	for _, tl := range m.lastRequest().Config.Tools {
		for _, d := range tl.FunctionDeclarations {
			offered[d.Name] = d.ParametersJsonSchema != nil
		}
	}
	if !offered["add_note"] || !offered["count_notes"] {
		t.Errorf("offered tools with schemas = %v, want the server's two", offered)
	}
}
