package agentloop_test

import (
	"context"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/orders"
)

// TestApprovalStep: the step a host that drives calls itself takes for a
// write that needs a human: the guard's answer says so, the request names
// the canonical intent and the operation the guard runs it as, a yes
// becomes a grant the guard runs the call with, once, and a no is kept for
// the principal in its scope only.
func TestApprovalStep(t *testing.T) {
	signer, err := guard.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	svc := orders.NewService()
	g := guard.New(orders.Tools(svc), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer})
	ctx := context.Background()
	call := guard.Call{Principal: user1,
		Proposal: guard.Proposal{Name: refundTool, Arguments: []byte(`{ "reason":"duplicate", "order_ref":"ORDER-7" }`)},
		Context:  guard.ExecutionContext{CallID: "call-1", Scope: "run-1"}}

	res, err := g.Dispatch(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if !host.NeedsApproval(g, call, res) {
		t.Fatalf("NeedsApproval(%v) = false for a write that needs approval, asked without a grant", res.Code)
	}
	read := guard.Call{Principal: user1, Proposal: guard.Proposal{Name: readTool, Arguments: []byte(readArgs)}}
	if rres, _ := g.Dispatch(ctx, read); host.NeedsApproval(g, read, rres) {
		t.Fatalf("NeedsApproval = true for a read answered %v", rres.Code)
	}

	req := host.NewApprovalRequest(g, call)
	if string(req.Arguments) != refundArgs || req.Fingerprint != guard.Fingerprint(refundTool, []byte(refundArgs)) ||
		req.OperationID != g.OperationID(call) || req.RunID != "run-1" || req.CallID != "call-1" || req.Principal.SubjectID != user1.SubjectID || req.Principal.TenantID != user1.TenantID {
		t.Fatalf("request %+v: want the canonical arguments %s, their fingerprint, the guard's operation id %q, the scope and call id",
			req, refundArgs, g.OperationID(call))
	}

	// A request whose arguments are not those its fingerprint names gets
	// no grant.
	forged := req
	forged.Arguments = []byte(`{"order_ref":"ORDER-8","reason":"duplicate"}`)
	if _, err := host.SignGrant(signer, nil, 0, forged, ""); err == nil {
		t.Fatal("SignGrant signed arguments its fingerprint does not name")
	}
	tok, err := host.SignGrant(signer, nil, 0, req, "")
	if err != nil {
		t.Fatal(err)
	}
	gr, err := signer.Verify(tok)
	if err != nil || gr.Approver != host.DefaultApprover || gr.Fingerprint != req.Fingerprint {
		t.Fatalf("grant %+v, %v: want the default approver and the request's fingerprint", gr, err)
	}
	call.Approval = tok
	if res, err = g.Dispatch(ctx, call); err != nil || res.Code != guard.CodeOK {
		t.Fatalf("with the grant: %v %v", res, err)
	}
	if host.NeedsApproval(g, call, &guard.Result{Code: guard.CodeApprovalRequired}) {
		t.Fatal("NeedsApproval = true for a call that presented a grant")
	}
	if n := svc.SideEffects(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}

	var d host.Denials
	if d.Has(req) {
		t.Fatal("a new Denials has a denial")
	}
	d.Add(req)
	other := req
	other.RunID = "run-2"
	stranger := req
	stranger.Principal = user2
	unscoped := req
	unscoped.RunID = ""
	d.Add(unscoped)
	if !d.Has(req) || d.Has(other) || d.Has(stranger) || d.Has(unscoped) {
		t.Fatalf("Has: same %v, other scope %v, other principal %v, no scope %v; want true, false, false, false",
			d.Has(req), d.Has(other), d.Has(stranger), d.Has(unscoped))
	}
}
