package tgeino_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/toolset"
)

const refundArgs = `{"order_ref":"ORDER-7","reason":"duplicate"}`

// wantCodes checks the codes and deliveries of the results the model saw.
func wantCodes(t *testing.T, got []guard.Result, want ...string) {
	t.Helper()
	var have []string
	for _, r := range got {
		have = append(have, r.Code.String()+"/"+string(r.Delivery))
	}
	if strings.Join(have, " ") != strings.Join(want, " ") {
		t.Fatalf("the model saw %v, want %v", have, want)
	}
}

// A model that repeats a write with a new call id, and a host that runs
// the whole run again after a crash (new call ids again, same run): the
// draft is created once, and every repeat replays it.
func TestRetryRunsOnce(t *testing.T) {
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs), say("refunded"),
		callTool("create_refund_draft", ` {"reason":"duplicate", "order_ref":"ORDER-7"}`), say("refunded"))
	h := newHarness(t, false, m)
	if o := h.run(t, "run-retry", "refund ORDER-7"); o.final != "refunded" || len(o.interrupts) != 0 {
		t.Fatalf("run ended %+v", o)
	}
	if o := h.run(t, "run-retry", "refund ORDER-7"); o.final != "refunded" {
		t.Fatalf("re-run ended %+v", o)
	}
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts created, want 1", n)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh", "OK/local_replay", "OK/local_replay")

	// Another run is another operation.
	m.replies = append(m.replies, callTool("create_refund_draft", refundArgs), say("again"))
	if o := h.run(t, "run-other", "refund ORDER-7 again"); o.final != "again" {
		t.Fatalf("other run ended %+v", o)
	}
	if n := h.shop.sideEffects(); n != 2 {
		t.Fatalf("%d drafts created after another run, want 2", n)
	}
}

// A model asking for another tenant's order gets NOT_FOUND, exactly as if
// it did not exist; the write on it does not run.
func TestOtherTenantNotFound(t *testing.T) {
	m := newScript(callTool("get_order", `{"order_ref":"ORDER-9"}`),
		callTool("create_refund_draft", `{"order_ref":"ORDER-9","reason":"duplicate"}`),
		callTool("get_order", `{"order_ref":"ORDER-7"}`), say("done"))
	h := newHarness(t, false, m)
	if o := h.run(t, "run-tenant", "refund ORDER-9"); o.final != "done" {
		t.Fatalf("run ended %+v", o)
	}
	got := m.toolResults(t)
	wantCodes(t, got, "NOT_FOUND/fresh", "NOT_FOUND/fresh", "OK/fresh")
	if strings.Contains(string(got[0].Data)+got[0].Message, "globex") {
		t.Fatalf("NOT_FOUND names the other tenant: %+v", got[0])
	}
	if n := h.shop.sideEffects(); n != 0 {
		t.Fatalf("%d drafts created, want 0", n)
	}
}

// A write that needs approval interrupts the run; resumed with a yes, it
// runs once. A host that resumes again from the same checkpoint (its
// process died before the checkpoint moved on) does not run it again.
func TestApprovalResumeApprove(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "invoke", true: "stream"}[streaming], func(t *testing.T) {
			testApprovalResumeApprove(t, streaming)
		})
	}
}

func testApprovalResumeApprove(t *testing.T, streaming bool) {
	m := newScript(callTool("create_refund_draft", refundArgs), say("refund drafted"))
	h := newHarnessWith(t, m, harnessOpts{approval: true, streaming: streaming})
	o := h.run(t, "run-approve", "refund ORDER-7")
	if len(o.interrupts) != 1 || o.final != "" {
		t.Fatalf("run ended %+v, want one approval interrupt", o)
	}
	req := o.interrupts[0].Request
	if req.Tool != "create_refund_draft" || string(req.Arguments) != refundArgs || req.Principal.TenantID != "acme" ||
		req.RunID != "run-approve" || req.Fingerprint != guard.Fingerprint(req.Tool, req.Arguments) {
		t.Fatalf("approval request %+v", req)
	}
	if n := h.shop.sideEffects(); n != 0 {
		t.Fatalf("%d drafts before the approval, want 0", n)
	}
	saved := h.cps.snapshot()
	yes := map[string]any{o.interrupts[0].InterruptID: host.Decision{Approved: true, Approver: "manager-1"}}
	if o := h.resume(t, "run-approve", yes); o.final != "refund drafted" || len(o.interrupts) != 0 {
		t.Fatalf("resume ended %+v", o)
	}
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts after the approval, want 1", n)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh")

	h.cps.restore(saved)
	m.turn = 1 // the model answers as it did after the tool result
	h.resume(t, "run-approve", yes)
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts after resuming twice, want 1", n)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh", "OK/local_replay")
}

// Resumed with a no, the model is told once that a human declined, and
// nothing runs; asking again in the same run is denied without a second
// interrupt.
func TestApprovalResumeDeny(t *testing.T) {
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs), say("not approved"))
	h := newHarness(t, true, m)
	o := h.run(t, "run-deny", "refund ORDER-7")
	if len(o.interrupts) != 1 {
		t.Fatalf("run ended %+v, want one approval interrupt", o)
	}
	no := map[string]any{o.interrupts[0].InterruptID: host.Decision{Approver: "manager-1", Reason: "not a duplicate"}}
	o = h.resume(t, "run-deny", no)
	if len(o.interrupts) != 0 || o.final != "not approved" {
		t.Fatalf("resume ended %+v, want the run to finish without asking again", o)
	}
	if n := h.shop.sideEffects(); n != 0 {
		t.Fatalf("%d drafts after a denial, want 0", n)
	}
	got := m.toolResults(t)
	wantCodes(t, got, "APPROVAL_REQUIRED/fresh", "APPROVAL_REQUIRED/fresh")
	if !strings.Contains(got[0].Message, "A human declined this action (not a duplicate)") {
		t.Fatalf("denial message %q", got[0].Message)
	}
	if !strings.Contains(got[1].Message, "A human declined") {
		t.Fatalf("second denial message %q", got[1].Message)
	}
}

// Resumed with an expired decision (nobody decided in time), the model is
// told so in guard.ExpiredMessage, not that a human declined; nothing
// runs, and asking again in the same run interrupts again.
func TestApprovalResumeExpired(t *testing.T) {
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs), say("still waiting"))
	h := newHarness(t, true, m)
	o := h.run(t, "run-expired", "refund ORDER-7")
	if len(o.interrupts) != 1 {
		t.Fatalf("run ended %+v, want one approval interrupt", o)
	}
	late := map[string]any{o.interrupts[0].InterruptID: host.Decision{Expired: true, Reason: "timed out"}}
	o = h.resume(t, "run-expired", late)
	if len(o.interrupts) != 1 {
		t.Fatalf("resume ended %+v, want the repeat put to a human again", o)
	}
	if n := h.shop.sideEffects(); n != 0 {
		t.Fatalf("%d drafts after an expiry, want 0", n)
	}
	got := m.toolResults(t)
	wantCodes(t, got, "APPROVAL_REQUIRED/fresh")
	if got[0].Message != guard.ExpiredMessage {
		t.Fatalf("expiry message %q, want %q", got[0].Message, guard.ExpiredMessage)
	}
}

// The model is offered the status tool; a write whose reply was lost is
// OUTCOME_UNKNOWN with its operation id, and the model's status query for
// it is settled from the shop's receipt, without running it again.
func TestStatusToolSettlesUnknown(t *testing.T) {
	askStatus := func(seen []*schema.Message) *schema.Message {
		last := &guard.Result{}
		for _, msg := range seen {
			if r, err := host.ModelResult(msg.Content); err == nil && msg.Role == schema.Tool {
				last = r
			}
		}
		args, _ := json.Marshal(map[string]any{"operation_id": last.OperationID})
		return callTool(toolset.StatusToolName, string(args))(seen)
	}
	m := newScript(callTool("create_refund_draft", refundArgs), askStatus, say("settled"))
	h := newHarness(t, false, m)
	h.shop.lose = 1
	if o := h.run(t, "run-status", "refund ORDER-7"); o.final != "settled" {
		t.Fatalf("run ended %+v", o)
	}
	var offered []string
	for _, ti := range m.tools {
		offered = append(offered, ti.Name)
	}
	if !slices.Contains(offered, toolset.StatusToolName) {
		t.Fatalf("the model was offered %v, without the status tool", offered)
	}
	got := m.toolResults(t)
	wantCodes(t, got, "OUTCOME_UNKNOWN/fresh", "OK/receipt_reconciled")
	if got[0].OperationID == "" {
		t.Fatal("OUTCOME_UNKNOWN without an operation id")
	}
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}

// The guard as an adk.ChatModelAgentMiddleware (WrapInvokableToolCall):
// the same interrupt, the same single run after a yes, the same replay of
// a repeat.
func TestAgentMiddleware(t *testing.T) {
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs),
		callTool("get_order", `{"order_ref":"ORDER-9"}`), say("refund drafted"))
	h := newHarnessWith(t, m, harnessOpts{approval: true, handler: true})
	o := h.run(t, "run-handler", "refund ORDER-7")
	if len(o.interrupts) != 1 {
		t.Fatalf("run ended %+v, want one approval interrupt", o)
	}
	yes := map[string]any{o.interrupts[0].InterruptID: host.Decision{Approved: true, Approver: "manager-1"}}
	if o := h.resume(t, "run-handler", yes); o.final != "refund drafted" || len(o.interrupts) != 0 {
		t.Fatalf("resume ended %+v", o)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh", "OK/local_replay", "NOT_FOUND/fresh")
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}

// With an Approver that says no, the run is not interrupted: the model is
// told a human declined, the same intent asked again in the run is denied
// without asking again, and nothing runs.
func TestApproverDenies(t *testing.T) {
	asked := 0
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs), say("not approved"))
	h := newHarnessWith(t, m, harnessOpts{approval: true, options: func(_ *toolset.Set, o *host.Options) {
		o.Approver = host.ApproverFunc(func(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
			asked++
			return host.Decision{Approver: "manager-1", Reason: "not a duplicate"}, nil
		})
	}})
	if o := h.run(t, "run-approver", "refund ORDER-7"); o.final != "not approved" || len(o.interrupts) != 0 {
		t.Fatalf("run ended %+v", o)
	}
	got := m.toolResults(t)
	wantCodes(t, got, "APPROVAL_REQUIRED/fresh", "APPROVAL_REQUIRED/fresh")
	if asked != 1 || h.shop.sideEffects() != 0 || !strings.Contains(got[0].Message, "(not a duplicate)") {
		t.Fatalf("asked %d times, %d drafts, message %q", asked, h.shop.sideEffects(), got[0].Message)
	}
}

// A status query for an operation id the guard would refuse (too long)
// names no operation: NOT_FOUND, not a failed run.
func TestStatusOfABadID(t *testing.T) {
	args, _ := json.Marshal(map[string]any{"operation_id": strings.Repeat("x", 600), "tool": nil})
	m := newScript(callTool(toolset.StatusToolName, string(args)), say("nothing"))
	h := newHarness(t, false, m)
	if o := h.run(t, "run-bad-id", "what happened?"); o.final != "nothing" {
		t.Fatalf("run ended %+v", o)
	}
	wantCodes(t, m.toolResults(t), "NOT_FOUND/fresh")
}

// The scope can be an adk session value (SessionScope): set on Run, Eino
// keeps it in the checkpoint, so the resumed run asks about, and runs, the
// same operation, and the model's repeat after the resume replays it.
func TestSessionScope(t *testing.T) {
	m := newScript(callTool("create_refund_draft", refundArgs), callTool("create_refund_draft", refundArgs), say("refund drafted"))
	h := newHarnessWith(t, m, harnessOpts{approval: true, options: func(_ *toolset.Set, o *host.Options) {
		o.Scope = tgeino.SessionScope("run_id")
	}})
	ctx := host.WithPrincipal(context.Background(), acme)
	o := drain(t, h.runner.Query(ctx, "refund ORDER-7", adk.WithCheckPointID("cp-session"),
		adk.WithSessionValues(map[string]any{"run_id": "run-session"})))
	if len(o.interrupts) != 1 || o.interrupts[0].Request.RunID != "run-session" {
		t.Fatalf("run ended %+v, want one approval interrupt in scope run-session", o)
	}
	wantOp, _ := guard.ScopeIDs("run-session", o.interrupts[0].Request.Fingerprint)
	if o.interrupts[0].Request.OperationID != wantOp {
		t.Fatalf("operation %s, want the scope's %s", o.interrupts[0].Request.OperationID, wantOp)
	}
	it, err := h.runner.ResumeWithParams(ctx, "cp-session", &adk.ResumeParams{
		Targets: map[string]any{o.interrupts[0].InterruptID: host.Decision{Approved: true, Approver: "manager-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if o := drain(t, it); o.final != "refund drafted" || len(o.interrupts) != 0 {
		t.Fatalf("resume ended %+v", o)
	}
	wantCodes(t, m.toolResults(t), "OK/fresh", "OK/local_replay")
	if n := h.shop.sideEffects(); n != 1 {
		t.Fatalf("%d drafts, want 1", n)
	}
}
