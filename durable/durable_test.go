package durable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// The principals of the orders world: user1 of tenant-a owns ORDER-7;
// tenant-b's user-1 owns ORDER-9 and nothing of tenant-a.
var (
	user1   = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	tenantB = guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}
)

const (
	readArgs    = `{"order_ref":"ORDER-7"}`
	refundDup   = `{"order_ref":"ORDER-7","reason":"duplicate"}`
	refundDmg   = `{"order_ref":"ORDER-7","reason":"damaged"}`
	refundTool  = "create_refund_draft"
	readTool    = "get_order"
	testTimeout = 20 * time.Second
)

// world is one test's fake Responses server, order service, guard store
// and Runner: the worker's half of a durable run.
type world struct {
	srv    *fakemodel.OpenAIServer
	svc    *orders.Service
	store  *guard.MemStore
	tools  *toolset.Set
	runner *durable.Runner
}

func newWorld(t *testing.T, turns ...fakemodel.Turn) *world {
	t.Helper()
	return newWorldTools(t, orders.Tools, turns...)
}

// newWorldTools is newWorld with the tools mk makes over the service.
func newWorldTools(t *testing.T, mk func(*orders.Service) *toolset.Set, turns ...fakemodel.Turn) *world {
	t.Helper()
	srv := fakemodel.NewOpenAI(turns...)
	t.Cleanup(srv.Close)
	svc := orders.NewService()
	store := guard.NewMemStore(guard.MemStoreOptions{})
	signer, err := guard.NewSigner(bytes.Repeat([]byte("durable-test-key/"), 2))
	if err != nil {
		t.Fatal(err)
	}
	tools := mk(svc)
	g := guard.New(tools, store, guard.Options{Signer: signer})
	h, err := host.New(g, tools, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	model := tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model"})
	return &world{srv: srv, svc: svc, store: store, tools: tools,
		runner: &durable.Runner{Host: h, Provider: model, Instructions: "You handle refunds."}}
}

// dispatched is one dispatch step as an engine records it.
type dispatched struct {
	in  durable.DispatchInput
	out durable.DispatchOutput
}

// steps is an engine in memory: each step calls the Runner directly. With
// retry, every dispatch runs twice and the second answer is the one kept,
// as when an engine retries a step whose result it did not record.
type steps struct {
	t      *testing.T
	ctx    context.Context
	r      *durable.Runner
	retry  bool
	decide func(host.ApprovalRequest) host.Decision
	asked  []host.ApprovalRequest
	log    []dispatched
}

func (s *steps) Turn(in durable.TurnInput) (durable.TurnOutput, error) { return s.r.Turn(s.ctx, in) }

func (s *steps) Dispatch(in durable.DispatchInput) (durable.DispatchOutput, error) {
	out, err := s.r.Dispatch(s.ctx, in)
	if err == nil && s.retry {
		out, err = s.r.Dispatch(s.ctx, in)
	}
	if err == nil {
		s.log = append(s.log, dispatched{in, out})
	}
	return out, err
}

func (s *steps) Approve(req host.ApprovalRequest) (host.Decision, error) {
	s.asked = append(s.asked, req)
	if s.decide == nil {
		s.t.Errorf("asked about %s %s, and no human was expected", req.Tool, req.Arguments)
		return host.Decision{}, nil
	}
	return s.decide(req), nil
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func yes(host.ApprovalRequest) host.Decision { return host.Decision{Approved: true, Approver: "ann"} }

func calls(cs ...fakemodel.Call) fakemodel.Turn { return fakemodel.Turn{Calls: cs} }

func call(id, name, args string) fakemodel.Call {
	return fakemodel.Call{CallID: id, Name: name, Arguments: args}
}

// outputs decodes the function_call_outputs of the model requests, by call
// id, each a tool-model-result-v2 object.
func outputs(t *testing.T, srv *fakemodel.OpenAIServer) map[string]guard.Result {
	t.Helper()
	m, err := srv.ModelResults()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func draftID(t *testing.T, r guard.Result) string {
	t.Helper()
	var d orders.Draft
	if err := json.Unmarshal(r.Data, &d); err != nil || d.ID == "" {
		t.Fatalf("result data %s is not a draft: %v", r.Data, err)
	}
	return d.ID
}

func codes(res *durable.Result) string {
	var b strings.Builder
	for _, c := range res.Calls {
		b.WriteString(c.Tool + ":" + c.Code + " ")
	}
	return strings.TrimSpace(b.String())
}

// TestDriveRunsReadAndApprovedWritesOnce: a read, then two writes a human
// approves, each executed once; the model is given each result, and the
// run completes with the model's answer.
func TestDriveRunsReadAndApprovedWritesOnce(t *testing.T) {
	w := newWorld(t,
		calls(call("c1", readTool, readArgs)),
		calls(call("c2", refundTool, refundDup)),
		calls(call("c3", refundTool, refundDmg)),
		fakemodel.Turn{Text: "Two refund drafts are ready."})
	s := &steps{t: t, ctx: ctxOf(t), r: w.runner, decide: yes}
	res, err := durable.Drive(s, durable.Run{ID: "run-1", Principal: user1, Input: "Refund ORDER-7 twice."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != durable.StatusCompleted || res.Output != "Two refund drafts are ready." || res.Turns != 4 {
		t.Fatalf("result %+v", res)
	}
	if got, want := codes(res), "get_order:OK create_refund_draft:OK create_refund_draft:OK"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if res.Calls[0].Asked || !res.Calls[1].Asked || !res.Calls[2].Asked {
		t.Errorf("asked flags %+v: the read is never asked about, each write is", res.Calls)
	}
	if n := w.svc.SideEffects(); n != 2 {
		t.Errorf("side effects %d, want 2 (one per approved write)", n)
	}
	if len(s.asked) != 2 {
		t.Fatalf("a human was asked %d times, want 2", len(s.asked))
	}
	for i, req := range s.asked {
		if req.RunID != "run-1" || req.Principal.TenantID != "tenant-a" || req.Principal.SubjectID != "user-1" ||
			req.Tool != refundTool || req.OperationID == "" {
			t.Errorf("request %d: %+v: it must name the run's scope, principal, tool and operation", i, req)
		}
	}
	if s.asked[0].OperationID == s.asked[1].OperationID {
		t.Errorf("two intents, one operation id %s", s.asked[0].OperationID)
	}
	outs := outputs(t, w.srv)
	if r := outs["c1"]; r.Code != guard.CodeOK || !strings.Contains(string(r.Data), `"paid"`) {
		t.Errorf("the model got %+v for the read", r)
	}
	d2, d3 := draftID(t, outs["c2"]), draftID(t, outs["c3"])
	if d2 == d3 {
		t.Errorf("two writes, one draft %s", d2)
	}
}

// TestDispatchReplayedExecutesNothingAgain: every dispatch step runs twice,
// as an engine retries a step whose answer it lost, and each recorded step
// runs again after the run: nothing executes again, and each answer is the
// stored result the model was given.
func TestDispatchReplayedExecutesNothingAgain(t *testing.T) {
	w := newWorld(t,
		calls(call("c1", readTool, readArgs)),
		calls(call("c2", refundTool, refundDup)),
		calls(call("c3", refundTool, refundDmg)),
		fakemodel.Turn{Text: "done"})
	ctx := ctxOf(t)
	s := &steps{t: t, ctx: ctx, r: w.runner, decide: yes, retry: true}
	res, err := durable.Drive(s, durable.Run{ID: "run-retry", Principal: user1, Input: "Refund ORDER-7 twice."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != durable.StatusCompleted || codes(res) != "get_order:OK create_refund_draft:OK create_refund_draft:OK" {
		t.Fatalf("result %+v", res)
	}
	if n := w.svc.SideEffects(); n != 2 {
		t.Fatalf("side effects %d after retried steps, want 2", n)
	}
	outs := outputs(t, w.srv)
	given := map[string]string{"c2": draftID(t, outs["c2"]), "c3": draftID(t, outs["c3"])}
	if given["c2"] == given["c3"] {
		t.Fatalf("two writes, one draft: %v", given)
	}

	// A recovered worker runs every recorded step again.
	replayed := 0
	for _, d := range s.log {
		out, err := w.runner.Dispatch(ctx, d.in)
		if err != nil {
			t.Fatalf("dispatch %s again: %v", d.in.Call.ID, err)
		}
		if d.in.Call.Name == readTool {
			continue
		}
		if d.out.Ask != nil {
			// The question's step, run after the yes: the operation is
			// done, so it is answered with its stored outcome, not asked
			// again and not run.
			if out.Ask != nil {
				t.Errorf("dispatch %s again asks again, after the write ran", d.in.Call.ID)
				continue
			}
		}
		var r guard.Result
		if err := r.UnmarshalJSON(out.Result); err != nil {
			t.Fatal(err)
		}
		if r.Code != guard.CodeOK || draftID(t, r) != given[d.in.Call.ID] {
			t.Errorf("dispatch %s again: %s, want the stored draft %s", d.in.Call.ID, out.Result, given[d.in.Call.ID])
		}
		if r.Delivery == guard.DeliveryFresh {
			t.Errorf("dispatch %s again: delivery %s, want a replay", d.in.Call.ID, r.Delivery)
		}
		replayed++
	}
	if replayed != 4 {
		t.Errorf("replayed %d write steps, want 4 (a question and a decision per write)", replayed)
	}
	if n := w.svc.SideEffects(); n != 2 {
		t.Errorf("side effects %d after the replays, want 2", n)
	}
	if len(s.asked) != 2 {
		t.Errorf("a human was asked %d times, want 2: a retried step does not ask again", len(s.asked))
	}
}

// TestDriveDeniedWriteNeverRuns: a human's no is the model's answer, with
// the approver's reason; the write never runs, and the same intent asked
// for again in the run gets the same no without asking anyone.
func TestDriveDeniedWriteNeverRuns(t *testing.T) {
	w := newWorld(t,
		calls(call("c1", refundTool, refundDup)),
		calls(call("c2", refundTool, refundDup)),
		fakemodel.Turn{Text: "The refund was not approved."})
	s := &steps{t: t, ctx: ctxOf(t), r: w.runner, decide: func(host.ApprovalRequest) host.Decision {
		return host.Decision{Approved: false, Approver: "bob", Reason: "not before the return arrives"}
	}}
	res, err := durable.Drive(s, durable.Run{ID: "run-no", Principal: user1, Input: "Refund ORDER-7."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != durable.StatusCompleted || codes(res) != "create_refund_draft:APPROVAL_REQUIRED create_refund_draft:APPROVAL_REQUIRED" {
		t.Fatalf("result %+v", res)
	}
	if !res.Calls[0].Asked || res.Calls[1].Asked {
		t.Errorf("asked flags %+v: the first call is asked about, the repeat is not", res.Calls)
	}
	if len(s.asked) != 1 {
		t.Errorf("a human was asked %d times, want 1", len(s.asked))
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects %d after a no, want 0", n)
	}
	outs := outputs(t, w.srv)
	if r := outs["c1"]; r.Code != guard.CodeApprovalRequired || !strings.Contains(r.Message, "not before the return arrives") {
		t.Errorf("the model got %+v for c1, want the decline with the approver's reason", r)
	}
	if r := outs["c2"]; r.Code != guard.CodeApprovalRequired || r.Message != guard.DeclinedMessage {
		t.Errorf("the model got %+v for c2, want the remembered decline", r)
	}
}

// TestStatusOfAnotherTenantsOperationIsNotFound: a run of tenant-b asking,
// through the status tool, about an operation of a tenant-a run gets
// NOT_FOUND; tenant-a's own run gets its outcome.
func TestStatusOfAnotherTenantsOperationIsNotFound(t *testing.T) {
	w := newWorld(t,
		calls(call("c1", refundTool, refundDup)),
		fakemodel.Turn{Text: "drafted"})
	ctx := ctxOf(t)
	a := &steps{t: t, ctx: ctx, r: w.runner, decide: yes}
	if _, err := durable.Drive(a, durable.Run{ID: "run-a", Principal: user1, Input: "Refund ORDER-7."}); err != nil {
		t.Fatal(err)
	}
	if len(a.asked) != 1 || w.svc.SideEffects() != 1 {
		t.Fatalf("asked %d, side effects %d: want the write approved and run once", len(a.asked), w.svc.SideEffects())
	}
	op := a.asked[0].OperationID
	status := `{"operation_id":"` + op + `","tool":null}`

	for _, tc := range []struct {
		name string
		p    guard.Principal
		want guard.Code
	}{{"other tenant", tenantB, guard.CodeNotFound}, {"same principal", user1, guard.CodeOK}} {
		t.Run(tc.name, func(t *testing.T) {
			w2 := *w
			w2.srv = fakemodel.NewOpenAI(calls(call("s1", toolset.StatusToolName, status)), fakemodel.Turn{Text: "ok"})
			t.Cleanup(w2.srv.Close)
			client := oai.NewClient(option.WithBaseURL(w2.srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
			r := *w.runner
			r.Provider = tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model"})
			s := &steps{t: t, ctx: ctx, r: &r}
			res, err := durable.Drive(s, durable.Run{ID: "run-" + tc.p.TenantID, Principal: tc.p, Input: "What happened to " + op + "?"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Calls) != 1 || res.Calls[0].Code != tc.want.String() {
				t.Fatalf("calls %+v, want %s", res.Calls, tc.want)
			}
			got := outputs(t, w2.srv)["s1"]
			if got.Code != tc.want {
				t.Errorf("the model got %+v, want %s", got, tc.want)
			}
			if tc.want == guard.CodeNotFound && len(got.Data) > 0 {
				t.Errorf("NOT_FOUND carries data %s", got.Data)
			}
		})
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects %d, want 1: a status query runs nothing", n)
	}
}

// TestDispatchSeesHostCall: the host's Options.Call sees each dispatch's
// guard call, with the step's context, as with every other host.
func TestDispatchSeesHostCall(t *testing.T) {
	w := newWorld(t)
	type key struct{}
	var seen []string
	h, err := host.New(w.runner.Host.Guard(), w.tools, host.Options{Call: func(ctx context.Context, c *guard.Call) {
		seen = append(seen, c.Context.Scope+"/"+c.Context.CallID+"/"+ctx.Value(key{}).(string))
		c.Context.OperationID = "op-from-host"
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := durable.Runner{Host: h, Provider: w.runner.Provider}
	ctx := context.WithValue(ctxOf(t), key{}, "step-ctx")
	out, err := r.Dispatch(ctx, durable.DispatchInput{RunID: "run-h", Principal: user1, Call: durable.Call{ID: "c1", Name: readTool, Arguments: readArgs}})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "run-h/c1/step-ctx" {
		t.Fatalf("Options.Call saw %v", seen)
	}
	recs, _, err := w.store.Audit(ctx, user1.TenantID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !strings.Contains(string(recs[0].Body), `"op-from-host"`) {
		t.Errorf("audit %+v, want the operation id the host set (result %s)", recs, out.Result)
	}

	// A host function that panics fails the step; nothing runs.
	hp, err := host.New(w.runner.Host.Guard(), w.tools, host.Options{Call: func(context.Context, *guard.Call) { panic("boom") }})
	if err != nil {
		t.Fatal(err)
	}
	rp := durable.Runner{Host: hp, Provider: w.runner.Provider}
	if _, err := rp.Dispatch(ctx, durable.DispatchInput{RunID: "run-h", Principal: user1, Call: durable.Call{ID: "c2", Name: refundTool, Arguments: refundDup}}); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("a panicking Options.Call: err %v, want the host panic", err)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects %d, want 0", n)
	}
}

// TestValidate: a Runner an engine can register has a Host and a Provider,
// and its Host asks no human inline: the run's durable wait does.
func TestValidate(t *testing.T) {
	w := newWorld(t)
	if err := w.runner.Validate(); err != nil {
		t.Fatalf("the world's runner: %v", err)
	}
	if err := (&durable.Runner{Host: w.runner.Host}).Validate(); err == nil {
		t.Error("a Runner without a Provider passed")
	}
	signer, _ := guard.NewSigner(bytes.Repeat([]byte("durable-test-key/"), 2))
	h, err := host.New(w.runner.Host.Guard(), w.tools, host.Options{Signer: signer,
		Approver: host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) { return host.Decision{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&durable.Runner{Host: h, Provider: w.runner.Provider}).Validate(); !errors.Is(err, durable.ErrInlineApprover) {
		t.Errorf("a Host with an Approver: %v, want ErrInlineApprover", err)
	}
}

// heldRefund is the orders tools whose refund stops after its draft is
// made, once, until release is closed: a step whose process stopped
// between the side effect and the commit.
func heldRefund(made chan<- struct{}, release <-chan struct{}) func(*orders.Service) *toolset.Set {
	return func(svc *orders.Service) *toolset.Set {
		var once sync.Once
		get := orders.Tools(svc).Lookup(readTool).(toolset.Declared)
		refund := toolset.Write(refundTool, "Create a refund draft.",
			func(ctx context.Context, inv *guard.Invocation, in orders.RefundInput) (orders.Draft, error) {
				d, err := svc.CreateDraft(ctx, inv.IdempotencyKey, inv.Principal.TenantID, in.OrderRef, in.Reason)
				once.Do(func() { made <- struct{}{}; <-release })
				return d, err
			}, &toolset.Options[orders.RefundInput, orders.Draft]{NeedsApproval: true,
				Receipt: func(ctx context.Context, inv *guard.Invocation) (orders.Draft, bool, error) {
					return svc.Receipt(ctx, inv.IdempotencyKey)
				}})
		return toolset.MustNew(get, refund)
	}
}

// TestStepOwnsItsWrite: the step that carries a human's yes ran the tool
// and stopped before the guard stored the outcome (its process died); the
// engine runs the same step again. It is given the draft from the tool's
// receipt, not IN_PROGRESS, and nothing runs twice. Another step of the
// same intent while the first holds the write (the model asked twice) is
// IN_PROGRESS.
func TestStepOwnsItsWrite(t *testing.T) {
	made, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	w := newWorldTools(t, heldRefund(made, release))
	ctx := ctxOf(t)
	in := durable.DispatchInput{RunID: "run-held", Principal: user1, ResponseID: "resp_1",
		Call: durable.Call{ID: "c1", Name: refundTool, Arguments: refundDup}, Step: "5"}
	ask, err := w.runner.Dispatch(ctx, in)
	if err != nil || ask.Ask == nil {
		t.Fatalf("dispatch: %+v, %v; want the question", ask, err)
	}
	d, pending := host.Decision{Approved: true, Approver: "ann"}, host.PendingOf(*ask.Ask)
	in.Decision, in.Pending, in.Step = &d, &pending, "8"
	first := make(chan error, 1)
	go func() { _, err := w.runner.Dispatch(ctx, in); first <- err }()
	<-made

	other := in
	other.Call.ID, other.Step = "c2", "12"
	if r := result(t, w, ctx, other); r.Code != guard.CodeInProgress {
		t.Errorf("another step of the intent: %s, want IN_PROGRESS", r.Code)
	}
	r := result(t, w, ctx, in)
	if r.Code != guard.CodeOK || draftID(t, r) != "DRAFT-1" {
		t.Errorf("the step run again: %+v, want the draft", r)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects %d, want 1", n)
	}
	// The first run was only held: let it go; its late commit changes
	// nothing.
	let()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := result(t, w, ctx, in); r.Code != guard.CodeOK || draftID(t, r) != "DRAFT-1" || w.svc.SideEffects() != 1 {
		t.Errorf("after the late commit: %+v, %d side effects", r, w.svc.SideEffects())
	}
}

// result runs a dispatch step and decodes its model result.
func result(t *testing.T, w *world, ctx context.Context, in durable.DispatchInput) guard.Result {
	t.Helper()
	out, err := w.runner.Dispatch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var r guard.Result
	if err := r.UnmarshalJSON(out.Result); err != nil {
		t.Fatalf("dispatch %s: %s: %v", in.Call.ID, out.Result, err)
	}
	return r
}

// TestQuestionID: a question's id is the same each time it is asked, and
// another for any other question.
func TestQuestionID(t *testing.T) {
	req := host.ApprovalRequest{RunID: "run-1", CallID: "c1", Tool: refundTool, Principal: user1,
		Fingerprint: "f1", OperationID: "op_1"}
	id := durable.QuestionID(req)
	if id != durable.QuestionID(req) || !strings.HasPrefix(id, "q_") || len(id) != 34 {
		t.Fatalf("QuestionID %q", id)
	}
	for _, edit := range []func(*host.ApprovalRequest){
		func(r *host.ApprovalRequest) { r.RunID = "run-2" },
		func(r *host.ApprovalRequest) { r.CallID = "c2" },
		func(r *host.ApprovalRequest) { r.Principal = tenantB },
		func(r *host.ApprovalRequest) { r.Fingerprint = "f2" },
		func(r *host.ApprovalRequest) { r.OperationID = "op_2" },
		func(r *host.ApprovalRequest) { r.RunID, r.CallID = "run-1c", "1" }, // fields never run together
	} {
		other := req
		edit(&other)
		if durable.QuestionID(other) == id {
			t.Errorf("%+v has the id of %+v", other, req)
		}
	}
}
