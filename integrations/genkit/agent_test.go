package tggenkit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tggenkit "github.com/toolguard/toolguard/integrations/genkit"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/orders"
)

// world is what the generation tests run against: the conformance order
// service (ORDER-7 is tenant-a/user-1's, ORDER-9 tenant-b's), its tools
// behind a guard on guard.MemStore, and Genkit with a scripted model.
type world struct {
	svc   *orders.Service
	store *guard.MemStore
	model *script
	gk    *genkit.Genkit
	gd    *tggenkit.Guarded
}

var key = []byte("tggenkit-test-approval-key-32-bytes!")

var (
	userA = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	userB = guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}
)

func newWorld(t *testing.T, configure ...func(*host.Options)) *world {
	t.Helper()
	o := frameworktest.NewOrders(t, key)
	w := &world{svc: o.Svc, store: o.Store, model: &script{}}
	opts := host.Options{Signer: o.Signer}
	for _, c := range configure {
		c(&opts)
	}
	var err error
	if w.gd, err = tggenkit.New(o.Guard, o.Tools, opts); err != nil {
		t.Fatal(err)
	}
	w.gk = newGenkit(t.Context(), w.model)
	return w
}

// session is the host's context of a generation: who it acts for, and the
// session that is its scope.
func session(p guard.Principal, scope string) context.Context {
	return host.WithScope(host.WithPrincipal(context.Background(), p), scope)
}

func refundReq(ref, order string) *ai.ToolRequest {
	return &ai.ToolRequest{Name: "create_refund_draft", Ref: ref, Input: map[string]any{"order_ref": order, "reason": "duplicate"}}
}

// result reads the model result of the tool response answering ref.
func result(t *testing.T, msgs []*ai.Message, ref string) *guard.Result {
	t.Helper()
	tr := resultOf(t, msgs, ref)
	res, err := host.ModelResult(tr.Output)
	if err != nil {
		t.Fatalf("tool output %v: %v", tr.Output, err)
	}
	return res
}

// seenByModel returns the outputs the model was sent in its latest
// request for ref.
func seenByModel(m *script, ref string) []map[string]any {
	req := m.lastRequest()
	if req == nil {
		return nil
	}
	var out []map[string]any
	for _, r := range toolResponses(req.Messages) {
		if r.Ref == ref {
			o, _ := r.Output.(map[string]any)
			out = append(out, o)
		}
	}
	return out
}

// pauseOnRefund runs a generation in which the model asks for a refund of
// ORDER-7 (ref call-1) and returns the interrupted response and its one
// approval request.
func pauseOnRefund(t *testing.T, w *world, ctx context.Context) (*ai.ModelResponse, tggenkit.Approval) {
	t.Helper()
	w.model.push(calls(refundReq("call-1", "ORDER-7")))
	resp, err := generate(ctx, w.gk, w.gd, ai.WithPrompt("refund my duplicate order ORDER-7"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != ai.FinishReasonInterrupted {
		t.Fatalf("finish reason %q, want interrupted", resp.FinishReason)
	}
	as := tggenkit.Approvals(resp.Interrupts()...)
	if len(as) != 1 {
		t.Fatalf("approvals = %d, want 1", len(as))
	}
	return resp, as[0]
}

// resume resumes an interrupted generation with the human's decision.
func resume(t *testing.T, w *world, ctx context.Context, resp *ai.ModelResponse, a tggenkit.Approval, d host.Decision) *ai.ModelResponse {
	t.Helper()
	restart, err := tggenkit.Resume(a.Part, d)
	if err != nil {
		t.Fatal(err)
	}
	out, err := generate(ctx, w.gk, w.gd, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	return out
}

// TestInterruptApprove: a write that needs approval interrupts the
// generation, with nothing run, and the interrupt names the exact intent;
// the resume with a yes runs it once under a grant approved by that human,
// and the model sees the one result.
func TestInterruptApprove(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	resp, a := pauseOnRefund(t, w, ctx)
	if n := w.svc.SideEffects(); n != 0 {
		t.Fatalf("side effects while interrupted = %d, want 0", n)
	}
	req := a.Request
	if req.Tool != "create_refund_draft" || req.Principal.TenantID != "tenant-a" || req.RunID != "session-1" ||
		req.Fingerprint != guard.Fingerprint("create_refund_draft", []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)) ||
		!strings.HasPrefix(req.OperationID, "op_") {
		t.Errorf("approval request = %+v, want the exact intent in the session's scope", req)
	}

	out := resume(t, w, ctx, resp, a, host.Decision{Approved: true, Approver: "manager-1"})
	if out.Text() != "done" {
		t.Errorf("resumed generation ended %q, want the model's answer", out.Text())
	}
	res := result(t, out.History(), "call-1")
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Fatalf("approved call = %s, want OK fresh", res)
	}
	w.wantSideEffects(t, 1)
	if got := seenByModel(w.model, "call-1"); len(got) != 1 || got[0]["code"] != "OK" {
		t.Errorf("the model was sent %v for call-1, want the one OK result", got)
	}
	frameworktest.WantApprovedWrite(t, w.store, "tenant-a", "manager-1", "genkit")
}

// TestInterruptDeny: a no reaches the model once, as APPROVAL_REQUIRED
// saying a human declined; nothing runs, and the same intent asked again
// in the session is declined without a new interrupt.
func TestInterruptDeny(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	resp, a := pauseOnRefund(t, w, ctx)
	out := resume(t, w, ctx, resp, a, host.Decision{Approved: false})
	res := result(t, out.History(), "call-1")
	if res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Fatalf("denied call = %s, want APPROVAL_REQUIRED, declined", res)
	}
	if got := seenByModel(w.model, "call-1"); len(got) != 1 || got[0]["message"] != guard.DeclinedMessage {
		t.Errorf("the model was sent %v for call-1, want the denial once", got)
	}

	// The model asks again, with another ref: no second interrupt.
	w.model.push(calls(refundReq("call-2", "ORDER-7")))
	again, err := generate(ctx, w.gk, w.gd, ai.WithMessages(out.History()...), ai.WithPrompt("please refund it anyway"))
	if err != nil {
		t.Fatal(err)
	}
	if again.FinishReason == ai.FinishReasonInterrupted {
		t.Errorf("the same intent was put to a human again: %v", again.Interrupts())
	}
	wantDenied(t, again.History(), "call-2")
	w.wantSideEffects(t, 0)
}

// TestInterruptExpired: resumed with an expired decision (nobody decided
// in time), the model is told so in guard.ExpiredMessage, not that a
// human declined; nothing runs, and the same intent asked again is put to
// a human again.
func TestInterruptExpired(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	resp, a := pauseOnRefund(t, w, ctx)
	out := resume(t, w, ctx, resp, a, host.Decision{Expired: true, Reason: "timed out"})
	res := result(t, out.History(), "call-1")
	if res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
		t.Fatalf("expired call = %s, want APPROVAL_REQUIRED with %q", res, guard.ExpiredMessage)
	}
	w.model.push(calls(refundReq("call-2", "ORDER-7")))
	again, err := generate(ctx, w.gk, w.gd, ai.WithMessages(out.History()...), ai.WithPrompt("please refund it"))
	if err != nil {
		t.Fatal(err)
	}
	if again.FinishReason != ai.FinishReasonInterrupted {
		t.Errorf("after an expiry the same intent was not put to a human again: %s", again.FinishReason)
	}
	w.wantSideEffects(t, 0)
}

// TestRetriedGenerationWritesOnce: the write runs once however the
// generation is retried or resumed: the resume delivered twice, the model
// asking again without refs (Genkit makes up new ones), twice in one
// reply, and the whole generation retried all replay the one draft.
func TestRetriedGenerationWritesOnce(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	resp, a := pauseOnRefund(t, w, ctx)
	out := resume(t, w, ctx, resp, a, host.Decision{Approved: true, Approver: "manager-1"})
	first := result(t, out.History(), "call-1")
	if first.Code != guard.CodeOK {
		t.Fatalf("approved call = %s, want OK", first)
	}

	// The host resumes from the same interrupted history again.
	again := resume(t, w, ctx, resp, a, host.Decision{Approved: true, Approver: "manager-1"})
	if res := result(t, again.History(), "call-1"); res.Code != guard.CodeOK || res.Delivery == guard.DeliveryFresh || string(res.Data) != string(first.Data) {
		t.Errorf("the resume sent again = %s, want the first draft replayed", res)
	}

	// The model repeats the call without refs, twice in one reply; then
	// the user retries the whole generation.
	for range 2 {
		w.model.push(calls(refundReq("", "ORDER-7"), refundReq("", "ORDER-7")))
		out, err := generate(ctx, w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
		if err != nil {
			t.Fatal(err)
		}
		if out.FinishReason == ai.FinishReasonInterrupted {
			t.Errorf("a replayed write asked a human again")
		}
		rs := toolResponses(out.History())
		if len(rs) != 2 {
			t.Fatalf("tool responses = %d, want 2", len(rs))
		}
		for _, r := range rs {
			res, err := host.ModelResult(r.Output)
			frameworktest.WantReplay(t, r.Ref, res, err, first)
		}
	}
	w.wantSideEffects(t, 1)

	// Another session is another operation: it asks again.
	w.model.push(calls(refundReq("call-x", "ORDER-7")))
	other, err := generate(session(userA, "session-2"), w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
	if err != nil {
		t.Fatal(err)
	}
	if other.FinishReason != ai.FinishReasonInterrupted {
		t.Errorf("a new session's write did not ask for approval")
	}
}

// TestOtherTenantNotFound: the model asks for another tenant's order, by
// read and by write: NOT_FOUND both times, as if it did not exist, and no
// human is asked to approve a refund the principal could not make.
func TestOtherTenantNotFound(t *testing.T) {
	w := newWorld(t)
	w.model.push(calls(&ai.ToolRequest{Name: "get_order", Ref: "read-9", Input: map[string]any{"order_ref": "ORDER-9"}},
		refundReq("refund-9", "ORDER-9")))
	out, err := generate(session(userA, "s1"), w.gk, w.gd, ai.WithPrompt("show me ORDER-9 and refund it"))
	if err != nil {
		t.Fatal(err)
	}
	if out.FinishReason == ai.FinishReasonInterrupted {
		t.Errorf("a human was asked about another tenant's order")
	}
	for _, ref := range []string{"read-9", "refund-9"} {
		if res := result(t, out.History(), ref); res.Code != guard.CodeNotFound || len(res.Data) != 0 {
			t.Errorf("%s = %s, want NOT_FOUND without data", ref, res)
		}
	}
	// The order's own tenant reads it.
	w.model.push(calls(&ai.ToolRequest{Name: "get_order", Ref: "read-9b", Input: map[string]any{"order_ref": "ORDER-9"}}))
	out, err = generate(session(userB, "s9"), w.gk, w.gd, ai.WithPrompt("show me ORDER-9"))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "read-9b"); res.Code != guard.CodeOK {
		t.Errorf("the owner's read = %s, want OK", res)
	}
	w.wantSideEffects(t, 0)
}

// TestToolsDeclared: the model is offered every tool with the schema the
// guard validates against, marked strict as the schema is, and the status
// tool.
func TestToolsDeclared(t *testing.T) {
	w := newWorld(t)
	if _, err := generate(session(userA, "s1"), w.gk, w.gd, ai.WithPrompt("hello")); err != nil {
		t.Fatal(err)
	}
	decls := map[string]*ai.ToolDefinition{}
	schemas := map[string][]byte{}
	for _, d := range w.model.lastRequest().Tools {
		decls[d.Name] = d
		schemas[d.Name], _ = json.Marshal(d.InputSchema)
	}
	frameworktest.WantDeclared(t, schemas)
	for _, d := range orders.Tools(orders.NewService()).Tools() {
		if got, ok := decls[d.Name()]; ok && got.Metadata["strict"] != d.Schema().Strict() {
			t.Errorf("%s declared strict %v, want %v", d.Name(), got.Metadata["strict"], d.Schema().Strict())
		}
	}
	if len(decls) != 3 {
		t.Errorf("offered %d tools, want 3", len(decls))
	}
}

// TestTwoApprovalsOneReply: a reply with two writes that need approval
// interrupts once with both; the resume carries a decision for each (yes
// to one, no to the other): the approved one runs once, the declined one
// never, and the model gets both answers.
func TestTwoApprovalsOneReply(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	damaged := &ai.ToolRequest{Name: "create_refund_draft", Ref: "call-2", Input: map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}}
	w.model.push(calls(refundReq("call-1", "ORDER-7"), damaged))
	resp, err := generate(ctx, w.gk, w.gd, ai.WithPrompt("refund ORDER-7 twice"))
	if err != nil {
		t.Fatal(err)
	}
	as := tggenkit.Approvals(resp.Interrupts()...)
	if len(as) != 2 {
		t.Fatalf("approvals = %d, want 2", len(as))
	}
	var restarts []*ai.Part
	for _, a := range as {
		r, err := tggenkit.Resume(a.Part, host.Decision{Approved: a.Part.ToolRequest.Ref == "call-1", Approver: "manager-1"})
		if err != nil {
			t.Fatal(err)
		}
		restarts = append(restarts, r)
	}
	out, err := generate(ctx, w.gk, w.gd, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restarts...))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "call-1"); res.Code != guard.CodeOK {
		t.Errorf("approved call = %s, want OK", res)
	}
	wantDenied(t, out.History(), "call-2")
	w.wantSideEffects(t, 1)
}

// TestStreamingResume: the same interrupt and resume through
// genkit.GenerateStream: the tool chunks streamed carry the model result,
// and the write runs once.
func TestStreamingResume(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	stream := func(opts ...ai.GenerateOption) (*ai.ModelResponse, []*ai.ToolResponse) {
		t.Helper()
		var (
			final  *ai.ModelResponse
			chunks []*ai.ToolResponse
		)
		opts = append([]ai.GenerateOption{ai.WithModelName(modelName), ai.WithUse(w.gd)}, opts...)
		for v, err := range genkit.GenerateStream(ctx, w.gk, opts...) {
			if err != nil {
				t.Fatal(err)
			}
			if v.Done {
				final = v.Response
				continue
			}
			for _, p := range v.Chunk.Content {
				if p.IsToolResponse() {
					chunks = append(chunks, p.ToolResponse)
				}
			}
		}
		return final, chunks
	}
	w.model.push(calls(refundReq("call-1", "ORDER-7")))
	resp, _ := stream(ai.WithPrompt("refund ORDER-7"))
	as := tggenkit.Approvals(resp.Interrupts()...)
	if resp.FinishReason != ai.FinishReasonInterrupted || len(as) != 1 {
		t.Fatalf("streamed generation ended %q with %d approvals, want interrupted with 1", resp.FinishReason, len(as))
	}
	restart, err := tggenkit.Resume(as[0].Part, host.Decision{Approved: true})
	if err != nil {
		t.Fatal(err)
	}
	out, chunks := stream(ai.WithMessages(resp.History()...), ai.WithToolRestarts(restart))
	if out.Text() != "done" || len(chunks) != 1 {
		t.Fatalf("resumed stream ended %q with %d tool chunks, want done and 1", out.Text(), len(chunks))
	}
	if res, err := host.ModelResult(chunks[0].Output); err != nil || res.Code != guard.CodeOK {
		t.Errorf("streamed tool chunk = %v (%v), want the OK model result", chunks[0].Output, err)
	}
	w.wantSideEffects(t, 1)
}

// wantSideEffects checks how many drafts the order service made.
func (w *world) wantSideEffects(t *testing.T, want int) {
	t.Helper()
	if n := w.svc.SideEffects(); n != want {
		t.Errorf("side effects = %d, want %d", n, want)
	}
}

// wantDenied checks that the call of ref was answered with a human's no.
func wantDenied(t *testing.T, msgs []*ai.Message, ref string) {
	t.Helper()
	if res := result(t, msgs, ref); res.Code != guard.CodeApprovalRequired || res.Message != guard.DeclinedMessage {
		t.Errorf("%s = %s, want APPROVAL_REQUIRED, a human declined", ref, res)
	}
}

// TestResumeFromStoredHistory: a host that keeps the interrupted history
// as JSON (a database, a client) reads the approval back from it and
// resumes from it; the write runs once.
func TestResumeFromStoredHistory(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "session-1")
	resp, _ := pauseOnRefund(t, w, ctx)
	stored, err := json.Marshal(resp.History())
	if err != nil {
		t.Fatal(err)
	}
	var history []*ai.Message
	if err := json.Unmarshal(stored, &history); err != nil {
		t.Fatal(err)
	}
	as := tggenkit.Approvals(history[len(history)-1].Content...)
	if len(as) != 1 || as[0].Request.Tool != "create_refund_draft" {
		t.Fatalf("approvals read back = %+v, want the refund", as)
	}
	restart, err := tggenkit.Resume(as[0].Part, host.Decision{Approved: true, Approver: "manager-1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := generate(ctx, w.gk, w.gd, ai.WithMessages(history...), ai.WithToolRestarts(restart))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, out.History(), "call-1"); res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh {
		t.Errorf("approved call = %s, want OK fresh", res)
	}
	w.wantSideEffects(t, 1)
}

// TestNoInterrupt: with Options.NoInterrupt nobody is asked: the model
// gets APPROVAL_REQUIRED as the result, and nothing runs.
func TestNoInterrupt(t *testing.T) {
	w := newWorld(t, func(o *host.Options) { o.NoInterrupt = true })
	w.model.push(calls(refundReq("call-1", "ORDER-7")))
	out, err := generate(session(userA, "s1"), w.gk, w.gd, ai.WithPrompt("refund ORDER-7"))
	if err != nil {
		t.Fatal(err)
	}
	if out.FinishReason == ai.FinishReasonInterrupted {
		t.Fatal("the generation was interrupted")
	}
	if res := result(t, out.History(), "call-1"); res.Code != guard.CodeApprovalRequired {
		t.Errorf("call = %s, want APPROVAL_REQUIRED", res)
	}
	w.wantSideEffects(t, 0)
}
