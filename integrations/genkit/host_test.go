package tggenkit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/orders"
)

// TestHostFailures: a host function that fails or panics (Principal,
// Scope, Call) stops the call before the guard: the generation ends with
// the host's error, nothing runs, nothing is audited, and no panic reaches
// the host.
func TestHostFailures(t *testing.T) {
	for name, h := range frameworktest.FailingHooks() {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, func(o *host.Options) { o.Principal, o.Scope, o.Call = h.Principal, h.Scope, h.Call })
			ctx := session(userA, "s1")
			if name == frameworktest.NoPrincipal {
				ctx = host.WithScope(context.Background(), "s1")
			}
			w.model.push(calls(refundReq("call-1", "ORDER-7")))
			_, err := generate(ctx, w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
			if err == nil || !strings.Contains(err.Error(), "tggenkit:") {
				t.Fatalf("generation error = %v, want the host's failure", err)
			}
			recs, _, _ := w.store.Audit(t.Context(), "tenant-a", 0, 10)
			if len(recs) != 0 || w.svc.SideEffects() != 0 {
				t.Errorf("%d audit records, %d side effects; want none", len(recs), w.svc.SideEffects())
			}
		})
	}
}

// TestResumeForAnotherCall: a decision presented for another principal
// than the one asked runs nothing, nor does a restart without a decision;
// Resume refuses a part that is not an approval interrupt.
func TestResumeForAnotherCall(t *testing.T) {
	w := newWorld(t)
	resp, a := pauseOnRefund(t, w, session(userA, "s1"))
	restart, err := tggenkit.Resume(a.Part, host.Decision{Approved: true})
	if err != nil {
		t.Fatal(err)
	}
	other := guard.Principal{TenantID: "tenant-a", SubjectID: "user-2"}
	_, err = generate(session(other, "s1"), w.gk, w.gd, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))
	if !errors.Is(err, host.ErrOtherCall) {
		t.Errorf("resume by another principal: %v, want ErrOtherCall", err)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
	// A restart that carries no decision of Resume's: nothing runs.
	bare := ai.NewToolRequestPart(a.Part.ToolRequest)
	bare.Metadata = map[string]any{"resumed": true}
	if _, err := generate(session(userA, "s1"), w.gk, w.gd, ai.WithMessages(resp.History()...), ai.WithToolRestarts(bare)); err == nil {
		t.Errorf("a restart without a decision: the resumed generation did not fail")
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
	if _, err := tggenkit.Resume(ai.NewTextPart("hi"), host.Decision{Approved: true}); !errors.Is(err, tggenkit.ErrNotApproval) {
		t.Errorf("Resume of a text part: %v, want ErrNotApproval", err)
	}
}

// TestNewRefuses: New refuses what would leave calls unguarded or
// approvals unsigned.
func TestNewRefuses(t *testing.T) {
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	if _, err := tggenkit.New(nil, tools, host.Options{}); err == nil {
		t.Error("New without a guard")
	}
	other := guard.New(orders.NoopTools(), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	if _, err := tggenkit.New(other, tools, host.Options{}); err == nil {
		t.Error("New with a guard over other tools")
	}
	if _, err := tggenkit.New(g, tools, host.Options{StatusTool: "get_order"}); err == nil {
		t.Error("New with a status tool named like a set tool")
	}
	approver := host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
		return host.Decision{Approved: true}, nil
	})
	if _, err := tggenkit.New(g, tools, host.Options{Approver: approver}); err == nil {
		t.Error("New with an Approver and no Signer")
	}
	if _, err := tggenkit.Import(nil, host.ImportOptions{}); err == nil {
		t.Error("Import without Authorize")
	}
}
