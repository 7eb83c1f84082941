package tgadk_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// world is what the agent tests run against: the conformance order
// service (ORDER-7 is tenant-a/user-1's, ORDER-9 tenant-b's), its tools
// behind a guard on guard.MemStore, and an ADK runner whose fake model the test
// scripts.
type world struct {
	svc   *orders.Service
	store *guard.MemStore
	model *fakeModel
	r     *runner.Runner
}

var key = []byte("tgadk-test-approval-key-32-bytes!!")

// principals maps ADK user ids to the host's principals.
var principals = map[string]guard.Principal{
	"user-1": {TenantID: "tenant-a", SubjectID: "user-1"},
	"user-9": {TenantID: "tenant-b", SubjectID: "user-1"},
}

func newWorld(t *testing.T) *world { return newWorldWith(t, nil) }

// newWorldWith is newWorld with options changed by set.
func newWorldWith(t *testing.T, set func(*tgadk.Options)) *world {
	t.Helper()
	o := frameworktest.NewOrders(t, key)
	w := &world{svc: o.Svc, store: o.Store, model: &fakeModel{}}
	opts := tgadk.Options{Options: host.Options{Signer: o.Signer,
		Principal: func(ctx context.Context) (guard.Principal, error) {
			actx, ok := ctx.(agent.Context)
			if !ok {
				return guard.Principal{}, guard.ErrBadPrincipal
			}
			p, ok := principals[actx.UserID()]
			if !ok {
				return guard.Principal{}, guard.ErrBadPrincipal
			}
			return p, nil
		}}}
	if set != nil {
		set(&opts)
	}
	a, err := tgadk.New(o.Guard, o.Tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.r = newRunner(t, a, w.model)
	return w
}

func refundCall(id, ref string) *genai.FunctionCall {
	return &genai.FunctionCall{ID: id, Name: "create_refund_draft", Args: map[string]any{"order_ref": ref, "reason": "duplicate"}}
}

// result returns the model result of the function response answering
// callID among the events ("" for the last function response).
func result(t *testing.T, evs []*session.Event, callID string) *guard.Result {
	t.Helper()
	last := frameworktest.Answer(t, "function response for call", responses(evs), callID, func(fr *genai.FunctionResponse) string { return fr.ID })
	res, err := host.ModelResult(last.Response)
	if err != nil {
		t.Fatalf("function response %v: %v", last.Response, err)
	}
	return res
}

// seenByModel returns the function responses the model was sent in its
// latest request, for callID.
func seenByModel(m *fakeModel, callID string) []map[string]any {
	var out []map[string]any
	req := m.lastRequest()
	if req == nil {
		return nil
	}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.ID == callID {
				out = append(out, p.FunctionResponse.Response)
			}
		}
	}
	return out
}

// refundTurn runs a user turn in which the model asks for a refund of
// ORDER-7 under callID, and returns its events.
func refundTurn(t *testing.T, w *world, sess, callID string) []*session.Event {
	t.Helper()
	w.model.push(calls(refundCall(callID, "ORDER-7")))
	return run(t, w.r, "user-1", sess, genai.NewContentFromText("refund ORDER-7", genai.RoleUser))
}

// pauseOnRefund runs a turn in which the model asks for a refund of
// ORDER-7 (call-1) and returns its events and the confirmation request it
// paused on.
func pauseOnRefund(t *testing.T, w *world) ([]*session.Event, *genai.FunctionCall) {
	t.Helper()
	evs := refundTurn(t, w, "s1", "call-1")
	fc := confirmationCall(evs)
	if fc == nil {
		t.Fatal("the run did not pause on a confirmation request")
	}
	return evs, fc
}

// TestConfirmationApprove: a write that needs approval pauses the run on
// ADK's confirmation, with nothing run; the yes resumes it, the call runs
// once under a grant approved by the user, and the model sees the one
// result.
func TestConfirmationApprove(t *testing.T) {
	w := newWorld(t)
	evs, fc := pauseOnRefund(t, w)
	if res := result(t, evs, "call-1"); res.Code != guard.CodeApprovalRequired || res.Message != tgadk.PendingMessage {
		t.Errorf("paused call's response = %s, want APPROVAL_REQUIRED pending", res)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Fatalf("side effects while paused = %d, want 0", n)
	}
	tc, _ := json.Marshal(fc.Args["toolConfirmation"])
	if !strings.Contains(string(tc), `"fingerprint":"`+guard.Fingerprint("create_refund_draft", []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`))+`"`) ||
		!strings.Contains(string(tc), "Approve create_refund_draft") {
		t.Errorf("confirmation request = %s, want the tool, its arguments and its fingerprint", tc)
	}

	evs = run(t, w.r, "user-1", "s1", confirm(fc, true))
	res := result(t, evs, "call-1")
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("approved call = %s, want OK fresh", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
	if got := seenByModel(w.model, "call-1"); len(got) != 1 || got[0]["code"] != "OK" {
		t.Errorf("the model was sent %v for call-1, want the one OK result", got)
	}
	frameworktest.WantApprovedWrite(t, w.store, "tenant-a", "user-1", "google-adk")
}

// TestConfirmationDeny: a no reaches the model once, as APPROVAL_REQUIRED
// saying a human declined; nothing runs, and the same intent asked again
// in the session is declined without a new confirmation.
func TestConfirmationDeny(t *testing.T) {
	w := newWorld(t)
	evs, fc := pauseOnRefund(t, w)
	evs = run(t, w.r, "user-1", "s1", confirm(fc, false))
	res := result(t, evs, "call-1")
	if res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Fatalf("denied call = %s, want APPROVAL_REQUIRED, declined", res)
	}
	if got := seenByModel(w.model, "call-1"); len(got) != 1 || got[0]["message"] != guard.DeclinedMessage {
		t.Errorf("the model was sent %v for call-1, want the denial once", got)
	}

	// The model asks again, with another call id: no second question.
	evs = refundTurn(t, w, "s1", "call-2")
	if fc := confirmationCall(evs); fc != nil {
		t.Errorf("the same intent was put to a human again: %v", fc.Args)
	}
	if res := result(t, evs, "call-2"); res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Errorf("repeated call = %s, want the same denial", res)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
}

// TestRetriedRunWritesOnce: the write runs once however the run is
// retried or resumed: the confirmation answered twice, the model asking
// again in the run, and the user retrying the whole turn with Gemini's
// call ids absent (ADK makes up new ones) all replay the one draft.
func TestRetriedRunWritesOnce(t *testing.T) {
	w := newWorld(t)
	evs, fc := pauseOnRefund(t, w)
	evs = run(t, w.r, "user-1", "s1", confirm(fc, true))
	first := result(t, evs, "call-1")
	if first.Code != guard.CodeOK {
		t.Fatalf("approved call = %s, want OK", first)
	}

	// The client answers no after its yes: the draft exists, and the
	// model is told so, not that a human declined.
	evs = run(t, w.r, "user-1", "s1", confirm(fc, false))
	if res := result(t, evs, "call-1"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("a no after the yes = %s, want the draft replayed", res)
	}

	// The client sends its yes again (a resume delivered twice).
	evs = run(t, w.r, "user-1", "s1", confirm(fc, true))
	for _, fr := range responses(evs) {
		if res, err := host.ModelResult(fr.Response); err == nil && res.Code == guard.CodeOK && res.Delivery == guard.DeliveryFresh {
			t.Errorf("the resume sent again ran the write afresh: %s", res)
		}
	}

	// The model repeats the call in a new turn, without a call id, twice
	// in one reply; then the user retries the turn.
	for range 2 {
		w.model.push(calls(refundCall("", "ORDER-7"), refundCall("", "ORDER-7")))
		evs = run(t, w.r, "user-1", "s1", genai.NewContentFromText("refund ORDER-7", genai.RoleUser))
		if fc := confirmationCall(evs); fc != nil {
			t.Errorf("a replayed write asked a human again")
		}
		rs := responses(evs)
		if len(rs) != 2 {
			t.Fatalf("function responses = %d, want 2", len(rs))
		}
		for _, fr := range rs {
			res, err := host.ModelResult(fr.Response)
			frameworktest.WantReplay(t, fr.ID, res, err, first)
		}
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}

	// Another session is another operation: it asks again.
	evs = refundTurn(t, w, "s2", "call-x")
	if confirmationCall(evs) == nil {
		t.Errorf("a new session's write did not ask for approval")
	}
}

// TestOtherTenantNotFound: the model asks for another tenant's order, by
// read and by write: NOT_FOUND both times, as if it did not exist, and no
// human is asked to approve a refund the principal could not make.
func TestOtherTenantNotFound(t *testing.T) {
	w := newWorld(t)
	w.model.push(calls(&genai.FunctionCall{ID: "read-9", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-9"}},
		refundCall("refund-9", "ORDER-9")))
	evs := run(t, w.r, "user-1", "s1", genai.NewContentFromText("show me ORDER-9 and refund it", genai.RoleUser))
	for _, id := range []string{"read-9", "refund-9"} {
		if res := result(t, evs, id); res.Code != guard.CodeNotFound || len(res.Data) != 0 {
			t.Errorf("%s = %s, want NOT_FOUND without data", id, res)
		}
	}
	if fc := confirmationCall(evs); fc != nil {
		t.Errorf("a human was asked about another tenant's order")
	}
	// The order's own tenant reads it.
	w.model.push(calls(&genai.FunctionCall{ID: "read-9b", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-9"}}))
	evs = run(t, w.r, "user-9", "s9", genai.NewContentFromText("show me ORDER-9", genai.RoleUser))
	if res := result(t, evs, "read-9b"); res.Code != guard.CodeOK {
		t.Errorf("the owner's read = %s, want OK", res)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
}

// TestToolsDeclared: the model is offered every tool with the schema the
// guard validates against, and the status tool.
func TestToolsDeclared(t *testing.T) {
	w := newWorld(t)
	run(t, w.r, "user-1", "s1", genai.NewContentFromText("hello", genai.RoleUser))
	req := w.model.lastRequest()
	schemas := map[string][]byte{}
	for _, tl := range req.Config.Tools {
		for _, d := range tl.FunctionDeclarations {
			schemas[d.Name], _ = json.Marshal(d.ParametersJsonSchema)
		}
	}
	frameworktest.WantDeclared(t, schemas)
}

// TestDecide: the host's decision overrides the answer. A refusal (here:
// nobody approves their own refund) is told to the model with its reason,
// and nothing runs; an Expired one is told as such (guard.ExpiredMessage)
// and lets the intent be asked again; an approval names the host's
// approver in the audit record.
func TestDecide(t *testing.T) {
	var expired bool
	w := newWorldWith(t, func(o *tgadk.Options) {
		o.Decide = func(ctx agent.Context, answer *toolconfirmation.ToolConfirmation, req tgadk.ConfirmationPayload) host.Decision {
			if req.Tool != "create_refund_draft" || req.Fingerprint == "" {
				t.Errorf("Decide asked about %+v", req)
			}
			if expired {
				return host.Decision{Expired: true, Reason: "nobody decided in time"}
			}
			return host.Decision{Approved: false, Approver: "policy", Reason: "a second person must approve"}
		}
	})
	_, fc := pauseOnRefund(t, w)
	evs := run(t, w.r, "user-1", "s1", confirm(fc, true))
	if res := result(t, evs, "call-1"); res.Code != guard.CodeApprovalRequired || !strings.Contains(res.Message, "a second person must approve") {
		t.Errorf("refused call = %s, want APPROVAL_REQUIRED with the reason", res)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}

	w = newWorldWith(t, func(o *tgadk.Options) {
		o.Decide = func(ctx agent.Context, answer *toolconfirmation.ToolConfirmation, req tgadk.ConfirmationPayload) host.Decision {
			if expired {
				return host.Decision{Expired: true, Reason: "nobody decided in time"}
			}
			return host.Decision{Approved: answer.Confirmed, Approver: "manager-7"}
		}
	})
	expired = true
	_, fc = pauseOnRefund(t, w)
	evs = run(t, w.r, "user-1", "s1", confirm(fc, true))
	if res := result(t, evs, "call-1"); res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
		t.Errorf("expired call = %s, want APPROVAL_REQUIRED with %q", res, guard.ExpiredMessage)
	}
	expired = false
	evs = refundTurn(t, w, "s1", "call-2")
	fc = confirmationCall(evs)
	if fc == nil {
		t.Fatal("after an expired decision the intent was not asked again")
	}
	evs = run(t, w.r, "user-1", "s1", confirm(fc, true))
	if res := result(t, evs, "call-2"); res.Code != guard.CodeOK {
		t.Fatalf("approved call = %s, want OK", res)
	}
	recs, _, _ := w.store.Audit(t.Context(), "tenant-a", 0, 100)
	found := false
	for _, r := range recs {
		found = found || (r.SideEffect == guard.SideEffectYes && strings.Contains(string(r.Body), `"approver":"manager-7"`))
	}
	if !found || w.svc.SideEffects() != 1 {
		t.Errorf("want one draft approved by manager-7; side effects %d", w.svc.SideEffects())
	}
}

// TestToolNotGivenNeverRuns: a tool the guard has but this agent was not
// given (the host gave it only get_order) is UNKNOWN_TOOL for the model,
// and neither runs nor asks a human; a tool nobody has is UNKNOWN_TOOL
// from the guard, audited.
func TestToolNotGivenNeverRuns(t *testing.T) {
	svc, store := orders.NewService(), guard.NewMemStore(guard.MemStoreOptions{})
	tools := orders.Tools(svc)
	signer, _ := guard.NewSigner(key)
	a, err := tgadk.New(guard.New(tools, store, guard.Options{Signer: signer}), tools, tgadk.Options{Options: host.Options{Signer: signer,
		Principal: byUser}})
	if err != nil {
		t.Fatal(err)
	}
	var only []tool.Tool
	for _, tl := range a.Tools() {
		if tl.Name() == "get_order" {
			only = append(only, tl)
		}
	}
	m := &fakeModel{}
	r := newRunnerFor(t, a, llmagent.Config{Name: "reader", Model: m, Tools: only})
	m.push(calls(refundCall("w1", "ORDER-7"), &genai.FunctionCall{ID: "x1", Name: "drop_tables", Args: map[string]any{}}))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("refund ORDER-7", genai.RoleUser))
	for _, id := range []string{"w1", "x1"} {
		if res := result(t, evs, id); res.Code != guard.CodeUnknownTool {
			t.Errorf("%s = %s, want UNKNOWN_TOOL", id, res)
		}
	}
	if confirmationCall(evs) != nil || svc.SideEffects() != 0 {
		t.Errorf("a tool the agent was not given asked a human or ran (%d side effects)", svc.SideEffects())
	}
	recs, _, _ := store.Audit(t.Context(), "tenant-a", 0, 10)
	if len(recs) != 1 || !strings.Contains(string(recs[0].Body), "drop_tables") {
		t.Errorf("audit records = %d, want the one of drop_tables", len(recs))
	}
}

// TestStatusToolSettlesUnknown: the draft is made but its reply is lost
// (OUTCOME_UNKNOWN, with the operation id); the model asks the status
// tool with the operation id alone (Gemini omits the nullable tool), and
// the receipt settles it: OK, receipt_reconciled, one draft.
func TestStatusToolSettlesUnknown(t *testing.T) {
	w := newWorld(t)
	_, fc := pauseOnRefund(t, w)
	w.svc.SetFailure(orders.FailAfterCommit)
	evs := run(t, w.r, "user-1", "s1", confirm(fc, true))
	w.svc.SetFailure(orders.NoFailure)
	lost := result(t, evs, "call-1")
	if lost.Code != guard.CodeOutcomeUnknown || lost.OperationID == "" {
		t.Fatalf("lost reply = %s, want OUTCOME_UNKNOWN with an operation id", lost)
	}
	w.model.push(calls(&genai.FunctionCall{ID: "q1", Name: toolset.StatusToolName, Args: map[string]any{"operation_id": lost.OperationID}}))
	evs = run(t, w.r, "user-1", "s1", genai.NewContentFromText("did it work?", genai.RoleUser))
	res := result(t, evs, "q1")
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryReceiptReconciled {
		t.Errorf("status query = %s, want OK receipt_reconciled", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
	w.model.push(calls(&genai.FunctionCall{ID: "q2", Name: toolset.StatusToolName, Args: map[string]any{"operation": lost.OperationID}}))
	evs = run(t, w.r, "user-1", "s1", genai.NewContentFromText("and?", genai.RoleUser))
	if res := result(t, evs, "q2"); res.Code != guard.CodeInvalidArguments {
		t.Errorf("status query with a wrong member = %s, want INVALID_ARGUMENTS", res)
	}
}

// TestInvocationScope: with the invocation as the scope, a confirmation's
// resume is still the same operation (ADK keeps the invocation id), and
// the model repeating itself within the invocation replays; a later user
// turn is another operation, put to a human again.
func TestInvocationScope(t *testing.T) {
	w := newWorldWith(t, func(o *tgadk.Options) { o.Scope = tgadk.InvocationScope })
	_, fc := pauseOnRefund(t, w)
	w.model.push(calls(refundCall("", "ORDER-7")))
	evs := run(t, w.r, "user-1", "s1", confirm(fc, true))
	if res := result(t, evs, "call-1"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("approved call = %s, want OK fresh", res)
	}
	if res := result(t, evs, ""); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("the repeat within the invocation = %s, want a replay", res)
	}
	evs = refundTurn(t, w, "s1", "call-2")
	if confirmationCall(evs) == nil {
		t.Error("a later turn's write was not put to a human: it should be another operation")
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
}

// TestConfirmationForAnotherIntent: a yes whose payload names another
// intent's fingerprint approves nothing, and is not taken for a denial.
func TestConfirmationForAnotherIntent(t *testing.T) {
	w := newWorld(t)
	_, fc := pauseOnRefund(t, w)
	answer := confirm(fc, true)
	answer.Parts[0].FunctionResponse.Response["payload"] = map[string]any{"fingerprint": guard.Fingerprint("create_refund_draft", []byte(`{"order_ref":"ORDER-8","reason":"duplicate"}`))}
	evs := run(t, w.r, "user-1", "s1", answer)
	if res := result(t, evs, "call-1"); res.Code != guard.CodeApprovalRequired || res.Message != tgadk.OtherAnswerMessage {
		t.Errorf("answer for another intent = %s, want APPROVAL_REQUIRED saying so", res)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
	evs = refundTurn(t, w, "s1", "call-2")
	if confirmationCall(evs) == nil {
		t.Error("the intent was not asked again")
	}
}

// TestTwoConfirmations: two writes of one reply each pause on their own
// confirmation; one answer approves the first and declines the second:
// one draft, and each call's own result.
func TestTwoConfirmations(t *testing.T) {
	w := newWorld(t)
	damaged := &genai.FunctionCall{ID: "call-2", Name: "create_refund_draft", Args: map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}}
	w.model.push(calls(refundCall("call-1", "ORDER-7"), damaged))
	evs := run(t, w.r, "user-1", "s1", genai.NewContentFromText("refund both", genai.RoleUser))
	asks := confirmationCalls(evs)
	if len(asks) != 2 {
		t.Fatalf("confirmation requests = %d, want 2", len(asks))
	}
	answer := confirm(asks[0], true)
	answer.Parts = append(answer.Parts, confirm(asks[1], false).Parts...)
	evs = run(t, w.r, "user-1", "s1", answer)
	if res := result(t, evs, "call-1"); res.Code != guard.CodeOK {
		t.Errorf("approved call = %s, want OK", res)
	}
	if res := result(t, evs, "call-2"); res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Errorf("declined call = %s, want the denial", res)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
}

// TestAgentCallbacks: without the plugin, the agent's own callbacks do
// the same: OnToolError answers a call of an unknown tool UNKNOWN_TOOL
// through the guard (audited), and BeforeTool refuses an unguarded tool.
func TestAgentCallbacks(t *testing.T) {
	svc, store := orders.NewService(), guard.NewMemStore(guard.MemStoreOptions{})
	tools := orders.Tools(svc)
	a, err := tgadk.New(guard.New(tools, store, guard.Options{}), tools, tgadk.Options{
		AllowUnguarded: func(tool.Tool) bool { return false },
		Options:        host.Options{Principal: byUser}})
	if err != nil {
		t.Fatal(err)
	}
	var wiped atomic.Bool
	wipe, err := functiontool.New(functiontool.Config{Name: "wipe", Description: "Wipe everything."},
		func(agent.Context, struct{}) (struct{}, error) { wiped.Store(true); return struct{}{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeModel{}
	r := newRunnerFor(t, a, llmagent.Config{Model: m, Tools: append(a.Tools(), wipe),
		OnToolErrorCallbacks: []llmagent.OnToolErrorCallback{a.OnToolError},
		BeforeToolCallbacks:  []llmagent.BeforeToolCallback{a.BeforeTool}})
	m.push(calls(&genai.FunctionCall{ID: "x", Name: "drop_tables", Args: map[string]any{}},
		&genai.FunctionCall{ID: "w", Name: "wipe", Args: map[string]any{}},
		&genai.FunctionCall{ID: "r", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-7"}}))
	evs := run(t, r, "user-1", "s1", genai.NewContentFromText("go", genai.RoleUser))
	for id, want := range map[string]guard.Code{"x": guard.CodeUnknownTool, "w": guard.CodeUnknownTool, "r": guard.CodeOK} {
		if res := result(t, evs, id); res.Code != want {
			t.Errorf("%s = %s, want %s", id, res, want)
		}
	}
	if wiped.Load() {
		t.Error("the unguarded tool ran")
	}
	recs, _, _ := store.Audit(t.Context(), "tenant-a", 0, 10)
	if len(recs) != 2 {
		t.Errorf("audit records = %d, want 2 (the unknown tool and the read)", len(recs))
	}
}
