package agentloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
)

// pauseScript is a model that reads ORDER-7 and asks for a refund (its keys
// out of order) in one turn, then reports the outputs it got.
func pauseScript() []fakemodel.Turn {
	return []fakemodel.Turn{
		calls(
			call("r1", readTool, readArgs),
			call("w1", refundTool, `{"reason": "duplicate", "order_ref": "ORDER-7"}`),
		),
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			var b strings.Builder
			for _, r := range lastOutputs(req) {
				b.WriteString(r.Code.String() + " ")
			}
			return &fakemodel.Turn{Text: strings.TrimSpace(b.String())}
		}},
	}
}

// pause runs pauseScript without an approver and checks the pause.
func pause(t *testing.T, w *world, loop *agentloop.Loop) *agentloop.RunResult {
	t.Helper()
	n := len(w.srv.Requests())
	w.srv.Enqueue(pauseScript()...)
	res, err := loop.Run(testCtx(t), user1, "refund ORDER-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusPaused || res.State == nil || len(res.Pending) != 1 || res.Turns != 1 {
		t.Fatalf("status %q, state %v, pending %+v, turns %d", res.Status, res.State != nil, res.Pending, res.Turns)
	}
	if got := len(w.srv.Requests()) - n; got != 1 {
		t.Fatalf("%d requests before the pause, want 1", got)
	}
	return res
}

// resumeOutputs returns the outputs of the request the resume sent.
func resumeOutputs(t *testing.T, w *world) map[string]output {
	t.Helper()
	reqs := w.srv.Requests()
	last := reqs[len(reqs)-1]
	if last.StatusCode != 200 {
		t.Fatalf("resume request rejected: %d %s", last.StatusCode, last.Body)
	}
	return byCallID(t, outputsOf(t, last))
}

// roundTrip saves and loads the state as a host would.
func roundTrip(t *testing.T, st *agentloop.State) *agentloop.State {
	t.Helper()
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := agentloop.LoadState(b)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

func TestPauseAndResume(t *testing.T) {
	w := newWorld(t)
	loop := w.loop()
	ctx := testCtx(t)
	res := pause(t, w, loop)

	req := res.Pending[0]
	fp := guard.Fingerprint(refundTool, []byte(refundArgs))
	op, _ := guard.ScopeIDs(res.RunID, fp)
	if req.CallID != "w1" || req.Tool != refundTool || string(req.Arguments) != refundArgs ||
		req.Principal.TenantID != user1.TenantID || req.Principal.SubjectID != user1.SubjectID ||
		req.Fingerprint != fp || req.OperationID != op {
		t.Fatalf("pending %+v, want fingerprint %s op %s", req, fp, op)
	}
	if w.svc.SideEffects() != 0 || w.svc.Calls() != 1 {
		t.Fatalf("before approval: %d side effects, %d calls", w.svc.SideEffects(), w.svc.Calls())
	}
	if got := kinds(res.Transcript); got != "user,call,result,call,approval_requested" {
		t.Errorf("paused transcript %s", got)
	}

	st := roundTrip(t, res.State)
	if st.RunID != res.RunID || st.TenantID != "tenant-a" || st.SubjectID != "user-1" || st.Turn != 1 ||
		st.Chain != w.srv.Requests()[0].ResponseID || len(st.Calls) != 2 || len(st.Transcript) != len(res.Transcript) {
		t.Fatalf("state %+v", st)
	}
	if !bytes.Equal(st.Pending[0].Arguments, req.Arguments) || st.Pending[0].Principal.SubjectID != "user-1" {
		t.Fatalf("pending after the round trip %+v", st.Pending[0])
	}
	tok, err := loop.Grant(st.Pending[0], "ann")
	if err != nil {
		t.Fatal(err)
	}
	done, err := loop.Resume(ctx, user1, st, agentloop.Approval{CallID: "w1", Grant: tok})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agentloop.StatusCompleted || done.Output != "OK OK" || done.Turns != 2 || done.RunID != res.RunID {
		t.Fatalf("resumed: status %q output %q turns %d run %q", done.Status, done.Output, done.Turns, done.RunID)
	}
	if w.svc.SideEffects() != 1 || w.svc.Calls() != 2 {
		t.Errorf("after approval: %d side effects, %d calls (the read must not run again)", w.svc.SideEffects(), w.svc.Calls())
	}
	checkChain(t, w.srv)
	outs := resumeOutputs(t, w)
	if len(outs) != 2 || outs["r1"].Result.Code != guard.CodeOK || outs["w1"].Result.Code != guard.CodeOK ||
		outs["w1"].Result.Delivery != guard.DeliveryFresh || draftOf(t, outs["w1"].Result).ID != "DRAFT-1" {
		t.Errorf("resume outputs %+v", outs)
	}
	if got := kinds(done.Transcript); got != "user,call,result,call,approval_requested,approved,result,message" {
		t.Errorf("resumed transcript %s", got)
	}

	// The paused state waits for nothing any more once resumed, and the
	// completed run has no state to resume.
	if _, err := loop.Resume(ctx, user1, done.State); !errors.Is(err, agentloop.ErrNotPaused) {
		t.Errorf("resume of a completed run: %v", err)
	}
	if _, err := loop.Resume(ctx, user1, &agentloop.State{}); !errors.Is(err, agentloop.ErrNotPaused) {
		t.Errorf("resume of an empty state: %v", err)
	}

	// Resuming the same saved state again (a host retrying) replays.
	w.srv.Enqueue(fakemodel.Turn{Text: "again"})
	again, err := loop.Resume(ctx, user1, roundTrip(t, res.State), agentloop.Approval{CallID: "w1", Grant: tok})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != agentloop.StatusCompleted || w.svc.SideEffects() != 1 {
		t.Errorf("second resume: %q, %d side effects", again.Status, w.svc.SideEffects())
	}
	if o := resumeOutputs(t, w)["w1"].Result; o.Code != guard.CodeOK || o.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("second resume output %+v", o)
	}
	if n, err := guard.VerifyAudit(ctx, loop.Store(), "tenant-a"); err != nil || n != 4 {
		t.Errorf("audit: %d records, %v", n, err)
	}
}

func TestResumeDenied(t *testing.T) {
	w := newWorld(t)
	loop := w.loop()
	res := pause(t, w, loop)
	done, err := loop.Resume(testCtx(t), user1, roundTrip(t, res.State), agentloop.Approval{CallID: "w1", Denied: true})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agentloop.StatusCompleted || done.Output != "OK APPROVAL_REQUIRED" {
		t.Fatalf("status %q output %q", done.Status, done.Output)
	}
	if w.svc.SideEffects() != 0 {
		t.Errorf("a denied write ran")
	}
	o := resumeOutputs(t, w)["w1"].Result
	if o.Code != guard.CodeApprovalRequired || !strings.Contains(o.Message, "declined") || o.Data != nil {
		t.Errorf("denied output %+v", o)
	}
	if got := kinds(done.Transcript); !strings.HasSuffix(got, "approval_requested,denied,result,message") {
		t.Errorf("transcript %s", got)
	}
	checkChain(t, w.srv)
}

func TestResumeErrors(t *testing.T) {
	w := newWorld(t)
	loop := w.loop()
	ctx := testCtx(t)
	res := pause(t, w, loop)
	tok, err := loop.Grant(res.Pending[0], "ann")
	if err != nil {
		t.Fatal(err)
	}
	ok := agentloop.Approval{CallID: "w1", Grant: tok}

	for name, p := range map[string]guard.Principal{
		"other subject": user2,
		"other tenant":  {TenantID: "tenant-b", SubjectID: "user-1"},
	} {
		if r, err := loop.Resume(ctx, p, res.State, ok); !errors.Is(err, agentloop.ErrWrongPrincipal) || r != nil {
			t.Errorf("%s: %v, %v", name, r, err)
		}
	}
	for name, approvals := range map[string][]agentloop.Approval{
		"none":       nil,
		"other call": {{CallID: "r1", Grant: tok}},
	} {
		r, err := loop.Resume(ctx, user1, res.State, approvals...)
		if err == nil || r != nil || !strings.Contains(err.Error(), "w1") {
			t.Errorf("%s: %v, %v", name, r, err)
		}
	}
	if _, err := loop.Resume(ctx, user1, nil); !errors.Is(err, agentloop.ErrNotPaused) {
		t.Errorf("nil state: %v", err)
	}
	if w.svc.SideEffects() != 0 || len(w.srv.Requests()) != 1 {
		t.Errorf("a failed resume acted: %d side effects, %d requests", w.svc.SideEffects(), len(w.srv.Requests()))
	}

	// Bad saved states.
	for _, b := range []string{`{`, `{"version":"agentloop-state-v0"}`, `{}`, `[]`} {
		if _, err := agentloop.LoadState([]byte(b)); err == nil {
			t.Errorf("LoadState(%s) worked", b)
		}
	}
	// A grant is only minted for a request whose fingerprint matches.
	bad := res.Pending[0]
	bad.Arguments = json.RawMessage(`{"order_ref":"ORDER-7","reason":"damaged"}`)
	if _, err := loop.Grant(bad, "ann"); err == nil {
		t.Error("Grant minted a token for arguments that do not match the fingerprint")
	}

	// The state was not consumed by the failed attempts.
	done, err := loop.Resume(ctx, user1, res.State, ok)
	if err != nil || done.Status != agentloop.StatusCompleted || w.svc.SideEffects() != 1 {
		t.Fatalf("resume after errors: %v, %v, %d side effects", done, err, w.svc.SideEffects())
	}
}

// No grant for other arguments, no tampered state, no forged or expired
// token makes the write run.
func TestResumeRejectsMismatchedGrants(t *testing.T) {
	damaged := json.RawMessage(`{"order_ref":"ORDER-7","reason":"damaged"}`)
	cases := []struct {
		name string
		// prepare returns the state to resume and the approval to give.
		prepare func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval)
		code    guard.Code
	}{
		{"grant for other arguments", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			other := res.Pending[0]
			other.Arguments = damaged
			other.Fingerprint = guard.Fingerprint(refundTool, damaged)
			tok, err := loop.Grant(other, "ann")
			if err != nil {
				t.Fatal(err)
			}
			return res.State, agentloop.Approval{CallID: "w1", Grant: tok}
		}, guard.CodeApprovalInvalid},
		{"tampered pending", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			st := editState(t, res.State, func(m map[string]any) {
				p := m["pending"].([]any)[0].(map[string]any)
				p["arguments"] = damaged
				p["fingerprint"] = guard.Fingerprint(refundTool, damaged)
			})
			tok, err := loop.Grant(st.Pending[0], "ann")
			if err != nil {
				t.Fatal(err)
			}
			return st, agentloop.Approval{CallID: "w1", Grant: tok}
		}, guard.CodeApprovalInvalid},
		{"tampered call", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			// The human approves what Pending shows; the state's call says
			// something else. The call id is bound to the original intent.
			st := editState(t, res.State, func(m map[string]any) {
				m["calls"].([]any)[1].(map[string]any)["arguments"] = string(damaged)
			})
			tok, err := loop.Grant(st.Pending[0], "ann")
			if err != nil {
				t.Fatal(err)
			}
			return st, agentloop.Approval{CallID: "w1", Grant: tok}
		}, guard.CodeCallIDConflict},
		{"tampered principal", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			other := res.Pending[0]
			other.Principal = user2
			tok, err := loop.Grant(other, "ann")
			if err != nil {
				t.Fatal(err)
			}
			return res.State, agentloop.Approval{CallID: "w1", Grant: tok}
		}, guard.CodeApprovalInvalid},
		{"forged token", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			tok, err := loop.Grant(res.Pending[0], "ann")
			if err != nil {
				t.Fatal(err)
			}
			return res.State, agentloop.Approval{CallID: "w1", Grant: tok[:len(tok)-2] + "AA"}
		}, guard.CodeApprovalInvalid},
		{"empty token", func(t *testing.T, loop *agentloop.Loop, res *agentloop.RunResult) (*agentloop.State, agentloop.Approval) {
			return res.State, agentloop.Approval{CallID: "w1"}
		}, guard.CodeApprovalRequired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			loop := w.loop()
			res := pause(t, w, loop)
			st, a := c.prepare(t, loop, res)
			done, err := loop.Resume(testCtx(t), user1, st, a)
			if err != nil {
				t.Fatal(err)
			}
			if w.svc.SideEffects() != 0 {
				t.Fatalf("the write ran")
			}
			if o := resumeOutputs(t, w)["w1"].Result; o.Code != c.code {
				t.Errorf("output %+v, want %s", o, c.code)
			}
			if done.Status != agentloop.StatusCompleted {
				t.Errorf("status %q", done.Status)
			}
		})
	}
}

// editState edits a saved state's JSON.
func editState(t *testing.T, st *agentloop.State, edit func(map[string]any)) *agentloop.State {
	t.Helper()
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	out, err := agentloop.LoadState(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A grant expires with the loop's clock.
func TestGrantExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := guard.ClockFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	w := newWorld(t)
	loop := w.loop(agentloop.Options{Clock: clock, GrantTTL: time.Minute})
	res := pause(t, w, loop)
	tok, err := loop.Grant(res.Pending[0], "ann")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if _, err := loop.Resume(testCtx(t), user1, res.State, agentloop.Approval{CallID: "w1", Grant: tok}); err != nil {
		t.Fatal(err)
	}
	if o := resumeOutputs(t, w)["w1"].Result; o.Code != guard.CodeApprovalInvalid || w.svc.SideEffects() != 0 {
		t.Errorf("expired grant: %+v, %d side effects", o, w.svc.SideEffects())
	}
}

// Two writes of the same intent and one of another wait in one pause; each
// needs an answer, and the same intent runs once.
func TestResumeSeveralPending(t *testing.T) {
	w := newWorld(t,
		calls(
			call("w1", refundTool, refundArgs),
			call("w2", refundTool, `{"reason":"duplicate","order_ref":"ORDER-7"}`),
			call("w3", refundTool, `{"order_ref":"ORDER-7","reason":"damaged"}`),
			call("r1", readTool, readArgs),
		),
		fakemodel.Turn{Text: "ok"},
	)
	loop := w.loop()
	ctx := testCtx(t)
	res, err := loop.Run(ctx, user1, "refund")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusPaused || len(res.Pending) != 3 {
		t.Fatalf("status %q pending %+v", res.Status, res.Pending)
	}
	if res.Pending[0].OperationID != res.Pending[1].OperationID || res.Pending[0].OperationID == res.Pending[2].OperationID {
		t.Errorf("operation ids %s %s %s", res.Pending[0].OperationID, res.Pending[1].OperationID, res.Pending[2].OperationID)
	}
	var approvals []agentloop.Approval
	for _, req := range res.Pending {
		tok, err := loop.Grant(req, "ann")
		if err != nil {
			t.Fatal(err)
		}
		approvals = append(approvals, agentloop.Approval{CallID: req.CallID, Grant: tok})
	}
	if _, err := loop.Resume(ctx, user1, res.State, approvals[:2]...); err == nil || !strings.Contains(err.Error(), "w3") {
		t.Errorf("resume without w3's answer: %v", err)
	}
	done, err := loop.Resume(ctx, user1, roundTrip(t, res.State), approvals...)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agentloop.StatusCompleted || w.svc.SideEffects() != 2 {
		t.Fatalf("status %q, %d side effects", done.Status, w.svc.SideEffects())
	}
	outs := resumeOutputs(t, w)
	if len(outs) != 4 {
		t.Fatalf("%d outputs", len(outs))
	}
	for id, want := range map[string]guard.Delivery{"w1": guard.DeliveryFresh, "w2": guard.DeliveryLocalReplay, "w3": guard.DeliveryFresh, "r1": guard.DeliveryFresh} {
		if o := outs[id].Result; o.Code != guard.CodeOK || o.Delivery != want {
			t.Errorf("%s: %s", id, outs[id].Raw)
		}
	}
	if draftOf(t, outs["w1"].Result) != draftOf(t, outs["w2"].Result) || draftOf(t, outs["w3"].Result).ID != "DRAFT-2" {
		t.Errorf("drafts %s %s %s", outs["w1"].Raw, outs["w2"].Raw, outs["w3"].Raw)
	}
	checkChain(t, w.srv)
}

// A run paused in one process resumes in another that shares the store and
// the signer key; a loop with another key rejects the grant.
func TestResumeInAnotherProcess(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	signer, err := guard.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	other, err := guard.NewSigner(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	// process builds a loop as another process would: its own client, its
	// own tools over the same downstream service, the same Redis.
	process := func(w *world, opts agentloop.Options) *agentloop.Loop {
		client := newClient(w.srv)
		opts.Store = w.store()
		l := agentloop.New(model(client), orders.Tools(w.svc), opts)
		if l.Err() != nil {
			t.Fatal(l.Err())
		}
		return l
	}

	t.Run("same key", func(t *testing.T) {
		w := newWorld(t)
		a := process(w, agentloop.Options{Signer: signer})
		res := pause(t, w, a)
		saved, _ := res.State.Marshal()
		// The approving host mints the grant with its own signer of the
		// same key.
		approverSigner, _ := guard.NewSigner(key)
		b := process(w, agentloop.Options{Signer: approverSigner})
		st, err := agentloop.LoadState(saved)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := b.Grant(st.Pending[0], "ann")
		if err != nil {
			t.Fatal(err)
		}
		done, err := b.Resume(testCtx(t), user1, st, agentloop.Approval{CallID: "w1", Grant: tok})
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != agentloop.StatusCompleted || done.Output != "OK OK" || w.svc.SideEffects() != 1 {
			t.Errorf("status %q output %q, %d side effects", done.Status, done.Output, w.svc.SideEffects())
		}
		checkChain(t, w.srv)
		// Both processes see one audit chain.
		if n, err := guard.VerifyAudit(testCtx(t), a.Store(), "tenant-a"); err != nil || n != 3 {
			t.Errorf("audit: %d, %v", n, err)
		}
	})
	t.Run("other key", func(t *testing.T) {
		w := newWorld(t)
		a := process(w, agentloop.Options{Signer: signer})
		res := pause(t, w, a)
		tok, err := a.Grant(res.Pending[0], "ann")
		if err != nil {
			t.Fatal(err)
		}
		b := process(w, agentloop.Options{Signer: other})
		if _, err := b.Resume(testCtx(t), user1, roundTrip(t, res.State), agentloop.Approval{CallID: "w1", Grant: tok}); err != nil {
			t.Fatal(err)
		}
		if o := resumeOutputs(t, w)["w1"].Result; o.Code != guard.CodeApprovalInvalid || w.svc.SideEffects() != 0 {
			t.Errorf("grant of another key: %+v, %d side effects", o, w.svc.SideEffects())
		}
	})
	t.Run("default keys", func(t *testing.T) {
		// Without Options.Signer each loop has a random key of its own.
		w := newWorld(t)
		a := process(w, agentloop.Options{})
		res := pause(t, w, a)
		tok, err := a.Grant(res.Pending[0], "ann")
		if err != nil {
			t.Fatal(err)
		}
		b := process(w, agentloop.Options{})
		if _, err := b.Resume(testCtx(t), user1, roundTrip(t, res.State), agentloop.Approval{CallID: "w1", Grant: tok}); err != nil {
			t.Fatal(err)
		}
		if o := resumeOutputs(t, w)["w1"].Result; o.Code != guard.CodeApprovalInvalid || w.svc.SideEffects() != 0 {
			t.Errorf("grant of another loop's random key: %+v", o)
		}
	})
}

// An Approver that fails or says no: the model is told, nothing runs.
func TestApproverDeniesOrFails(t *testing.T) {
	for name, a := range map[string]host.ApproverFunc{
		"no": func(context.Context, host.ApprovalRequest) (host.Decision, error) {
			return host.Decision{Approved: false, Approver: "bob"}, nil
		},
		"error": func(context.Context, host.ApprovalRequest) (host.Decision, error) {
			return host.Decision{Approved: true, Approver: "bob"}, errors.New("pager down")
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, pauseScript()...)
			res, err := w.loop(agentloop.Options{Approver: a}).Run(testCtx(t), user1, "refund")
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != agentloop.StatusCompleted || res.Output != "OK APPROVAL_REQUIRED" || w.svc.SideEffects() != 0 {
				t.Fatalf("status %q output %q, %d side effects", res.Status, res.Output, w.svc.SideEffects())
			}
			o := byCallID(t, outputsOf(t, w.srv.Requests()[1]))["w1"].Result
			if !strings.Contains(o.Message, "declined") {
				t.Errorf("denial message %q", o.Message)
			}
			if !strings.Contains(res.Transcript.String(), "approval:  create_refund_draft denied by") {
				t.Errorf("transcript:\n%s", res.Transcript)
			}
		})
	}
}

// repeatScript asks for the same refund in two turns (as models repeat
// themselves), then reports the outputs it got last.
func repeatScript() []fakemodel.Turn {
	return []fakemodel.Turn{
		calls(call("w1", refundTool, refundArgs)),
		calls(call("w2", refundTool, `{"reason":"duplicate","order_ref":"ORDER-7"}`)),
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			var b strings.Builder
			for _, r := range lastOutputs(req) {
				b.WriteString(r.Code.String() + " " + r.Message)
			}
			return &fakemodel.Turn{Text: b.String()}
		}},
	}
}

// TestDeniedIntentAskedOnce: within a run, an intent a human declined is
// not put to a human again; the repeat gets the same denial (contract
// section 4).
func TestDeniedIntentAskedOnce(t *testing.T) {
	asked := 0
	no := host.ApproverFunc(func(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
		asked++
		if req.RunID == "" {
			t.Errorf("approval request without its run id: %+v", req)
		}
		return host.Decision{Approver: "lead-1", Reason: "not a duplicate"}, nil
	})
	w := newWorld(t, repeatScript()...)
	res, err := w.loop(agentloop.Options{Approver: no}).Run(testCtx(t), user1, "refund")
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || w.svc.SideEffects() != 0 {
		t.Fatalf("a human was asked %d times, %d side effects; want 1 and 0", asked, w.svc.SideEffects())
	}
	first := byCallID(t, outputsOf(t, w.srv.Requests()[1]))["w1"].Result
	if first.Code != guard.CodeApprovalRequired || !strings.Contains(first.Message, "declined") || !strings.Contains(first.Message, "not a duplicate") {
		t.Errorf("first denial %+v", first)
	}
	if !strings.HasPrefix(res.Output, "APPROVAL_REQUIRED A human declined") {
		t.Errorf("the repeat got %q", res.Output)
	}
	if !strings.Contains(res.Transcript.String(), "the human's earlier answer in this run") {
		t.Errorf("transcript:\n%s", res.Transcript)
	}
}

// TestResumeDeniedNotAskedAgain: a denial given on Resume, with who
// decided and why, reaches the model once; the model's repeat of the same
// intent in the resumed run is denied without pausing again.
func TestResumeDeniedNotAskedAgain(t *testing.T) {
	w := newWorld(t, repeatScript()...)
	loop := w.loop()
	res, err := loop.Run(testCtx(t), user1, "refund")
	if err != nil || res.Status != agentloop.StatusPaused || len(res.Pending) != 1 {
		t.Fatalf("run: %v, status %q, pending %+v", err, res.Status, res.Pending)
	}
	if res.Pending[0].RunID != res.RunID {
		t.Errorf("pending request run id %q, want %q", res.Pending[0].RunID, res.RunID)
	}
	done, err := loop.Resume(testCtx(t), user1, roundTrip(t, res.State),
		agentloop.Approval{CallID: "w1", Denied: true, Approver: "lead-1", Reason: "not a duplicate"})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agentloop.StatusCompleted || !strings.HasPrefix(done.Output, "APPROVAL_REQUIRED A human declined") {
		t.Fatalf("status %q output %q: the repeat paused or ran", done.Status, done.Output)
	}
	if w.svc.SideEffects() != 0 {
		t.Errorf("a denied write ran")
	}
	if s := done.Transcript.String(); !strings.Contains(s, "denied by lead-1") || !strings.Contains(s, "the human's earlier answer in this run") {
		t.Errorf("transcript:\n%s", s)
	}
}

// TestExpiredApproval: an approval nobody decided in time reaches the
// model as guard.ExpiredMessage, not as a human's no, whether the Loop's
// Approver said so (or its wait ran out) or the host resumed the run with
// an expired Approval; nothing runs, and the repeat of the intent is put
// to a human again.
func TestExpiredApproval(t *testing.T) {
	for name, answer := range map[string]func() (host.Decision, error){
		"expired":      func() (host.Decision, error) { return host.Decision{Expired: true, Reason: "timed out"}, nil },
		"wait ran out": func() (host.Decision, error) { return host.Decision{}, context.DeadlineExceeded },
	} {
		t.Run("approver/"+name, func(t *testing.T) {
			asked := 0
			a := host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
				asked++
				return answer()
			})
			w := newWorld(t, repeatScript()...)
			res, err := w.loop(agentloop.Options{Approver: a}).Run(testCtx(t), user1, "refund")
			if err != nil {
				t.Fatal(err)
			}
			first := byCallID(t, outputsOf(t, w.srv.Requests()[1]))["w1"].Result
			if first.Code != guard.CodeApprovalRequired || first.Message != guard.ExpiredMessage {
				t.Errorf("expired approval told as %+v, want %q", first, guard.ExpiredMessage)
			}
			if res.Output != "APPROVAL_REQUIRED "+guard.ExpiredMessage || asked != 2 || w.svc.SideEffects() != 0 {
				t.Errorf("repeat got %q, asked %d times, %d side effects; want the expiry again, 2 and 0", res.Output, asked, w.svc.SideEffects())
			}
		})
	}
	t.Run("resume", func(t *testing.T) {
		w := newWorld(t, repeatScript()...)
		loop := w.loop()
		res, err := loop.Run(testCtx(t), user1, "refund")
		if err != nil || res.Status != agentloop.StatusPaused {
			t.Fatalf("run: %v, status %q", err, res.Status)
		}
		done, err := loop.Resume(testCtx(t), user1, roundTrip(t, res.State),
			agentloop.Approval{CallID: "w1", Denied: true, Expired: true, Reason: "timed out"})
		if err != nil {
			t.Fatal(err)
		}
		o := resumeOutputs(t, w)["w1"].Result
		if o.Code != guard.CodeApprovalRequired || o.Message != guard.ExpiredMessage {
			t.Errorf("expired approval told as %+v, want %q", o, guard.ExpiredMessage)
		}
		if done.Status != agentloop.StatusPaused || len(done.Pending) != 1 || w.svc.SideEffects() != 0 {
			t.Errorf("after the expiry: status %q, pending %+v, %d side effects; want the repeat asked again", done.Status, done.Pending, w.svc.SideEffects())
		}
	})
}
