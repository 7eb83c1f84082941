package tggenkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/orders"
)

type NoteIn struct {
	OrderRef string `json:"order_ref"`
	Text     string `json:"text"`
}

type NoteOut struct {
	NoteID string `json:"note_id"`
	Key    string `json:"key"`
}

// TestImportedGenkitTool: a tool defined with genkit.DefineTool, imported
// into the set, is validated against its own input schema before it runs,
// authorized per tenant, approved through the interrupt, and run once per
// intent, through Genkit's tool runner (a middleware inside the guard's
// sees it), with the downstream idempotency key; a Genkit tool the guard
// was not given never runs.
func TestImportedGenkitTool(t *testing.T) {
	svc := orders.NewService()
	m := &script{}
	gk := newGenkit(t.Context(), m)
	var notes, rogue atomic.Int32
	note := genkit.DefineTool(gk, "add_order_note", "Add a note to an order.",
		func(tc *ai.ToolContext, in NoteIn) (NoteOut, error) {
			n := notes.Add(1)
			inv := host.InvocationFrom(tc)
			if inv == nil {
				return NoteOut{}, fmt.Errorf("no invocation")
			}
			return NoteOut{NoteID: fmt.Sprintf("NOTE-%d", n), Key: inv.IdempotencyKey}, nil
		})
	del := genkit.DefineTool(gk, "delete_order", "Delete an order.",
		func(*ai.ToolContext, NoteIn) (string, error) { rogue.Add(1); return "deleted", nil })
	imported, err := tggenkit.Import(note, host.ImportOptions{LoggedArguments: []string{"order_ref"},
		Authorize: func(_ context.Context, _ string, inv *guard.Invocation) error {
			var in NoteIn
			if err := json.Unmarshal(inv.Arguments, &in); err != nil {
				return guard.ErrNotFound
			}
			if _, ok := svc.Owner(inv.Principal.TenantID, in.OrderRef); !ok {
				return guard.ErrNotFound
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	set, err := orders.Tools(svc).With(imported)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := guard.NewSigner(key)
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	gd, err := tggenkit.New(g, set, host.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := session(userA, "s1")
	// A middleware inside the guard's sees what Genkit's tool runner runs
	// once the guard let a call through.
	var inner atomic.Int32
	spy := ai.MiddlewareFunc(func(context.Context) (*ai.Hooks, error) {
		return &ai.Hooks{WrapTool: func(ctx context.Context, p *ai.ToolParams, next ai.ToolNext) (*ai.MultipartToolResponse, error) {
			inner.Add(1)
			return next(ctx, p)
		}}, nil
	})
	tools := []ai.GenerateOption{ai.WithTools(imported.Genkit(), del), ai.WithUse(spy)}

	m.push(calls(
		&ai.ToolRequest{Name: "add_order_note", Ref: "bad", Input: map[string]any{"order_ref": "ORDER-7", "text": 5}},
		&ai.ToolRequest{Name: "add_order_note", Ref: "other", Input: map[string]any{"order_ref": "ORDER-9", "text": "hi"}},
		&ai.ToolRequest{Name: "delete_order", Ref: "rogue", Input: map[string]any{"order_ref": "ORDER-7", "text": ""}},
		&ai.ToolRequest{Name: "add_order_note", Ref: "good", Input: map[string]any{"order_ref": "ORDER-7", "text": "hi"}}))
	resp, err := generate(ctx, gk, gd, append(tools, ai.WithPrompt("note ORDER-7"))...)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]guard.Code{"bad": guard.CodeInvalidArguments, "other": guard.CodeNotFound, "rogue": guard.CodeUnknownTool} {
		if res := result(t, []*ai.Message{interruptedAnswers(resp)}, ref); res.Code != want {
			t.Errorf("%s = %s, want %s", ref, res, want)
		}
	}
	as := tggenkit.Approvals(resp.Interrupts()...)
	if len(as) != 1 || as[0].Request.Tool != "add_order_note" {
		t.Fatalf("approvals = %+v, want the good note", as)
	}
	if notes.Load() != 0 || rogue.Load() != 0 {
		t.Fatalf("tools ran before approval: notes %d, rogue %d", notes.Load(), rogue.Load())
	}

	restart, err := tggenkit.Resume(as[0].Part, host.Decision{Approved: true, Approver: "manager-1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := generate(ctx, gk, gd, append(tools, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))...)
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, out.History(), "good")
	var got NoteOut
	if err := json.Unmarshal(res.Data, &got); res.Code != guard.CodeOK || err != nil || got.NoteID != "NOTE-1" || got.Key == "" {
		t.Fatalf("approved note = %s, want NOTE-1 with the idempotency key", res)
	}

	// The model asks again in the session: the note is replayed.
	m.push(calls(&ai.ToolRequest{Name: "add_order_note", Ref: "again", Input: map[string]any{"order_ref": "ORDER-7", "text": "hi"}}))
	out, err = generate(ctx, gk, gd, append(tools, ai.WithPrompt("note ORDER-7 again"))...)
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "again"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay || frameworktest.CanonicalJSON(t, res.Data) != frameworktest.CanonicalJSON(t, mustJSON(t, got)) {
		t.Errorf("repeated note = %s, want the first one replayed", res)
	}
	if notes.Load() != 1 || rogue.Load() != 0 || inner.Load() != 1 {
		t.Errorf("notes %d, rogue %d, runs through Genkit's runner %d; want 1, 0 and 1", notes.Load(), rogue.Load(), inner.Load())
	}
}

// interruptedAnswers returns, as a tool message, the answers Genkit kept
// on an interrupted reply's other tool requests (their pending output).
func interruptedAnswers(resp *ai.ModelResponse) *ai.Message {
	msg := &ai.Message{Role: ai.RoleTool}
	for _, p := range resp.Message.Content {
		if out, ok := p.Metadata["pendingOutput"]; ok && p.IsToolRequest() {
			msg.Content = append(msg.Content, ai.NewToolResponsePart(&ai.ToolResponse{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Output: out}))
		}
	}
	return msg
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// notGiven returns Genkit with the scripted model, and the guard's
// middleware over the orders tools and one Genkit tool, name, imported
// with opts and not given to the generation; runs counts the tool's runs.
func notGiven(t *testing.T, name string, opts host.ImportOptions) (*script, *genkit.Genkit, *tggenkit.Guarded, *atomic.Int32) {
	t.Helper()
	m := &script{}
	gk := newGenkit(t.Context(), m)
	runs := new(atomic.Int32)
	tool := ai.NewTool(name, "A note tool.", func(_ *ai.ToolContext, in NoteIn) (NoteOut, error) {
		runs.Add(1)
		return NoteOut{NoteID: "NOTE-1"}, nil
	})
	opts.Authorize = func(context.Context, string, *guard.Invocation) error { return nil }
	imported, err := tggenkit.Import(tool, opts)
	if err != nil {
		t.Fatal(err)
	}
	set, err := orders.Tools(orders.NewService()).With(imported)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := guard.NewSigner(key)
	gd, err := tggenkit.New(guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer}), set, host.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	return m, gk, gd, runs
}

// TestImportedToolNotGiven: a Genkit tool the guard imported but the
// generation was not given (no ai.WithTools) still runs once the guard
// let the call through, directly rather than as the stand-in Genkit's
// tool loop gets for it.
func TestImportedToolNotGiven(t *testing.T) {
	m, gk, gd, runs := notGiven(t, "lookup_note", host.ImportOptions{Read: true})
	m.push(calls(&ai.ToolRequest{Name: "lookup_note", Ref: "n1", Input: map[string]any{"order_ref": "ORDER-7", "text": "x"}}))
	out, err := generate(session(userA, "s1"), gk, gd, ai.WithPrompt("look up the note"))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "n1"); res.Code != guard.CodeOK || runs.Load() != 1 {
		t.Errorf("lookup = %s after %d runs, want OK after 1", res, runs.Load())
	}
}

// TestImportedWriteNotGivenResumes: the same for an imported write that
// needs approval: the interrupt's restart finds the tool on the resume
// too, and it runs once.
func TestImportedWriteNotGivenResumes(t *testing.T) {
	m, gk, gd, runs := notGiven(t, "send_note", host.ImportOptions{})
	ctx := session(userA, "s1")
	m.push(calls(&ai.ToolRequest{Name: "send_note", Ref: "n1", Input: map[string]any{"order_ref": "ORDER-7", "text": "x"}}))
	resp, err := generate(ctx, gk, gd, ai.WithPrompt("send the note"))
	if err != nil {
		t.Fatal(err)
	}
	as := tggenkit.Approvals(resp.Interrupts()...)
	if len(as) != 1 || runs.Load() != 0 {
		t.Fatalf("%d approvals after %d runs, want 1 after 0", len(as), runs.Load())
	}
	restart, _ := tggenkit.Resume(as[0].Part, host.Decision{Approved: true})
	out, err := generate(ctx, gk, gd, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "n1"); res.Code != guard.CodeOK || runs.Load() != 1 {
		t.Errorf("send = %s after %d runs, want OK after 1", res, runs.Load())
	}
}
