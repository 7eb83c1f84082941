package agentloop_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// The draft is created but the reply is lost: the model is told the outcome
// is unknown with the operation id, asks the status tool, and the receipt
// settles it without a second draft.
func TestUnknownOutcomeSettledByStatusTool(t *testing.T) {
	var (
		mu      sync.Mutex
		seenOps []string
	)
	w := newWorld(t,
		calls(call("w1", refundTool, refundArgs)),
		fakemodel.Turn{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range lastOutputs(req) {
				if r.Recovery() == guard.RecoveryQueryStatus {
					mu.Lock()
					seenOps = append(seenOps, r.OperationID)
					mu.Unlock()
					args, _ := json.Marshal(toolset.StatusInput{OperationID: r.OperationID})
					return &fakemodel.Turn{Text: "checking", Calls: []fakemodel.Call{call("s1", toolset.StatusToolName, string(args))}}
				}
			}
			return &fakemodel.Turn{Text: "no unknown outcome seen"}
		}},
		fakemodel.Turn{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range lastOutputs(req) {
				if r.Code == guard.CodeOK && r.Delivery == guard.DeliveryReceiptReconciled {
					return &fakemodel.Turn{Text: "confirmed"}
				}
			}
			return &fakemodel.Turn{Text: "not confirmed"}
		}},
	)
	w.svc.FailNext(orders.FailAfterCommit)
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	ctx := testCtx(t)
	res, err := loop.Run(ctx, user1, "refund ORDER-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "confirmed" || res.Turns != 3 {
		t.Fatalf("status %q output %q turns %d\n%s", res.Status, res.Output, res.Turns, res.Transcript)
	}
	if w.svc.SideEffects() != 1 {
		t.Errorf("%d side effects, want 1", w.svc.SideEffects())
	}
	checkChain(t, w.srv)
	opID := appr.asked()[0].OperationID
	mu.Lock()
	if len(seenOps) != 1 || seenOps[0] != opID {
		t.Errorf("model saw operation ids %v, want %s", seenOps, opID)
	}
	mu.Unlock()

	reqs := w.srv.Requests()
	unknown := outputsOf(t, reqs[1])
	if len(unknown) != 1 {
		t.Fatalf("outputs %+v", unknown)
	}
	if r := unknown[0].Result; r.Code != guard.CodeOutcomeUnknown || r.Status() != guard.StatusUnknown ||
		r.Outcome() != guard.OutcomeUnknown || r.OperationID != opID || r.Data != nil {
		t.Errorf("lost reply: %s", unknown[0].Raw)
	}
	settled := outputsOf(t, reqs[2])
	if len(settled) != 1 || settled[0].CallID != "s1" {
		t.Fatalf("outputs %+v", settled)
	}
	r := settled[0].Result
	if r.Code != guard.CodeOK || r.Delivery != guard.DeliveryReceiptReconciled || draftOf(t, r).ID != "DRAFT-1" {
		t.Errorf("status tool: %s", settled[0].Raw)
	}

	// Asked again, directly, the stored result is replayed.
	again, err := loop.QueryStatus(ctx, user1, opID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Code != guard.CodeOK || again.Delivery != guard.DeliveryLocalReplay || string(again.Data) != string(r.Data) {
		t.Errorf("QueryStatus: %s", again)
	}
	for _, p := range []guard.Principal{user2, {TenantID: "tenant-b", SubjectID: "user-1"}} {
		if other, err := loop.QueryStatus(ctx, p, opID); err != nil || other.Code != guard.CodeNotFound {
			t.Errorf("QueryStatus as %+v: %v, %v", p, other, err)
		}
	}
	if _, err := loop.QueryStatus(ctx, guard.Principal{}, opID); err == nil {
		t.Error("QueryStatus accepted an empty principal")
	}
	if w.svc.SideEffects() != 1 {
		t.Errorf("%d side effects after the status queries", w.svc.SideEffects())
	}
	if _, err := guard.VerifyAudit(ctx, loop.Store(), "tenant-a"); err != nil {
		t.Error(err)
	}
}

// While the receipt cannot be read the outcome stays unknown; once it can,
// the next query settles it.
func TestUnknownOutcomeReceiptUnavailable(t *testing.T) {
	w := newWorld(t,
		calls(call("w1", refundTool, refundArgs)),
		fakemodel.Turn{Text: "lost"},
	)
	w.svc.FailNext(orders.FailAfterCommit)
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	ctx := testCtx(t)
	if _, err := loop.Run(ctx, user1, "refund"); err != nil {
		t.Fatal(err)
	}
	op := appr.asked()[0].OperationID
	w.svc.SetFailure(orders.FailRateLimit)
	r, err := loop.QueryStatus(ctx, user1, op)
	if err != nil || r.Code != guard.CodeOutcomeUnknown || r.OperationID != op {
		t.Fatalf("receipt offline: %v, %v", r, err)
	}
	w.svc.SetFailure(orders.NoFailure)
	r, err = loop.QueryStatus(ctx, user1, op)
	if err != nil || r.Code != guard.CodeOK || r.Delivery != guard.DeliveryReceiptReconciled {
		t.Fatalf("receipt back: %v, %v", r, err)
	}
	if w.svc.SideEffects() != 1 {
		t.Errorf("%d side effects", w.svc.SideEffects())
	}
}

// The status tool checks its arguments like any tool.
func TestStatusToolArguments(t *testing.T) {
	st := toolset.StatusToolName
	w := newWorld(t,
		calls(
			call("s1", st, `{}`),
			call("s2", st, `{"operation_id":5}`),
			call("s3", st, `not json`),
			call("s4", st, `{"operation_id":"op_x","extra":1}`),
			call("s5", st, `{"operation_id":"op_x","operation_id":"op_y"}`),
			call("s6", st, `{"operation_id":"op_never_ran","tool":null}`),
			call("s7", st, `{"operation_id":"","tool":null}`),
			call("s8", st, ``),
			call("s9", st, `{"operation_id":"op_never_ran"}`), // an absent nullable member reads as null (contract section 3)
			call("s10", st, `{"operation_id":"op_never_ran","tool":"get_order"}`),
		),
		fakemodel.Turn{Text: "ok"},
	)
	res, err := w.loop().Run(testCtx(t), user1, "status?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted {
		t.Fatalf("status %q", res.Status)
	}
	outs := byCallID(t, outputsOf(t, w.srv.Requests()[1]))
	want := map[string]guard.Code{
		"s1": guard.CodeInvalidArguments, "s2": guard.CodeInvalidArguments, "s3": guard.CodeInvalidArguments,
		"s4": guard.CodeInvalidArguments, "s5": guard.CodeInvalidArguments, "s6": guard.CodeNotFound,
		"s7": guard.CodeNotFound, "s8": guard.CodeInvalidArguments, "s9": guard.CodeNotFound,
		"s10": guard.CodeNotFound,
	}
	if len(outs) != len(want) {
		t.Fatalf("%d outputs", len(outs))
	}
	for id, code := range want {
		if outs[id].Result.Code != code {
			t.Errorf("%s: %s, want %s", id, outs[id].Raw, code)
		}
	}
}

// The status tool asks for the run's principal only: another user's
// operation id is NOT_FOUND.
func TestStatusToolOtherPrincipal(t *testing.T) {
	w := newWorld(t,
		calls(call("w1", refundTool, refundArgs)),
		fakemodel.Turn{Text: "refunded"},
	)
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	ctx := testCtx(t)
	if _, err := loop.Run(ctx, user1, "refund"); err != nil {
		t.Fatal(err)
	}
	op := appr.asked()[0].OperationID
	args, _ := json.Marshal(toolset.StatusInput{OperationID: op})
	w.srv.Enqueue(calls(call("s1", toolset.StatusToolName, string(args))), fakemodel.Turn{Text: "?"})
	if _, err := loop.Run(ctx, user2, "what happened to user-1's refund?"); err != nil {
		t.Fatal(err)
	}
	reqs := w.srv.Requests()
	if o := outputsOf(t, reqs[len(reqs)-1]); len(o) != 1 || o[0].Result.Code != guard.CodeNotFound || o[0].Result.Data != nil {
		t.Errorf("other principal's operation: %+v", o)
	}
	// The owner's own status tool replays it.
	w.srv.Enqueue(calls(call("s2", toolset.StatusToolName, string(args))), fakemodel.Turn{Text: "!"})
	if _, err := loop.Run(ctx, user1, "what happened to my refund?"); err != nil {
		t.Fatal(err)
	}
	reqs = w.srv.Requests()
	if o := outputsOf(t, reqs[len(reqs)-1]); len(o) != 1 || o[0].Result.Code != guard.CodeOK || o[0].Result.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("owner's operation: %+v", o)
	}
}

// Without the status tool, a call of it is an unknown tool.
func TestStatusToolRemoved(t *testing.T) {
	w := newWorld(t,
		calls(call("s1", toolset.StatusToolName, `{"operation_id":"op_1","tool":null}`)),
		fakemodel.Turn{Text: "ok"},
	)
	if _, err := w.loop(agentloop.Options{StatusTool: "-"}).Run(testCtx(t), user1, "hi"); err != nil {
		t.Fatal(err)
	}
	reqs := w.srv.Requests()
	for _, r := range reqs {
		for _, n := range r.ToolNames() {
			if n == toolset.StatusToolName {
				t.Errorf("status tool declared")
			}
		}
	}
	if o := outputsOf(t, reqs[1]); len(o) != 1 || o[0].Result.Code != guard.CodeUnknownTool {
		t.Errorf("outputs %+v", o)
	}
}
