package agentloop_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// A read, then an approved write: the whole run on the wire.
func TestHappyPath(t *testing.T) {
	w := newWorld(t,
		calls(call("call_read", readTool, readArgs)),
		fakemodel.Turn{Text: "ORDER-7 is paid; drafting the refund.",
			Calls: []fakemodel.Call{call("call_write", refundTool, `{ "reason": "duplicate", "order_ref": "ORDER-7" }`)}},
		fakemodel.Turn{Text: "Refund draft DRAFT-1 is created."},
	)
	appr := &approver{}
	var events []agentloop.Event
	loop := w.loop(agentloop.Options{Approver: appr,
		Instructions: "Be a support agent.",
		Observer:     func(e agentloop.Event) { events = append(events, e) }})
	ctx := testCtx(t)

	res, err := loop.Run(ctx, user1, "Refund my duplicate order ORDER-7.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "Refund draft DRAFT-1 is created." || res.Turns != 3 {
		t.Fatalf("result: status %q output %q turns %d", res.Status, res.Output, res.Turns)
	}
	if !strings.HasPrefix(res.RunID, "run_") || res.Pending != nil || res.State != nil {
		t.Errorf("run id %q, pending %v, state %v", res.RunID, res.Pending, res.State)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("%d side effects, want 1", n)
	}
	if w.srv.Remaining() != 0 {
		t.Errorf("%d scripted turns left", w.srv.Remaining())
	}

	reqs := w.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	checkChain(t, w.srv)

	// Every request declares the toolset's strict tools and the status tool,
	// with the very schemas the guard validates against.
	set := orders.Tools(w.svc)
	statusSchema, err := toolset.SchemaFor[toolset.StatusInput]()
	if err != nil {
		t.Fatal(err)
	}
	wantSchemas := map[string][]byte{
		readTool:               set.Tools()[0].Schema().JSON(),
		refundTool:             set.Tools()[1].Schema().JSON(),
		toolset.StatusToolName: statusSchema.JSON(),
	}
	for i, r := range reqs {
		if r.Model != "scripted-model" || r.Instructions != "Be a support agent." {
			t.Errorf("request %d: model %q instructions %q", i, r.Model, r.Instructions)
		}
		if got := strings.Join(r.ToolNames(), ","); got != "get_order,create_refund_draft,query_operation_status" {
			t.Fatalf("request %d: tools %s", i, got)
		}
		for _, tool := range r.Tools {
			if tool.Type != "function" || tool.Strict == nil || !*tool.Strict || tool.Description == "" {
				t.Errorf("request %d: tool %s is not a strict described function: %s", i, tool.Name, tool.Raw)
			}
			if !jsonEqual(t, tool.Parameters, wantSchemas[tool.Name]) {
				t.Errorf("request %d: tool %s parameters %s, want %s", i, tool.Name, tool.Parameters, wantSchemas[tool.Name])
			}
		}
	}
	var params struct {
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
		Properties           map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(reqs[0].Tools[2].Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if len(params.Required) != 2 || params.Required[0] != "operation_id" || params.Required[1] != "tool" || params.AdditionalProperties == nil ||
		*params.AdditionalProperties || params.Properties["operation_id"].Type != "string" {
		t.Errorf("status tool schema %s", reqs[0].Tools[2].Parameters)
	}

	// The first request carries the user's input, the others one output per
	// call of the previous response.
	if len(reqs[0].Input) != 1 || reqs[0].Input[0].Role != "user" || reqs[0].Input[0].Text != "Refund my duplicate order ORDER-7." {
		t.Errorf("first input %+v", reqs[0].Input)
	}
	outs := outputsOf(t, reqs[1])
	if len(outs) != 1 || outs[0].CallID != "call_read" {
		t.Fatalf("turn 2 outputs %+v", outs)
	}
	if r := outs[0].Result; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryFresh ||
		!jsonEqual(t, r.Data, []byte(`{"order_ref":"ORDER-7","status":"paid"}`)) {
		t.Errorf("read result %s", outs[0].Raw)
	}
	outs = outputsOf(t, reqs[2])
	if len(outs) != 1 || outs[0].CallID != "call_write" {
		t.Fatalf("turn 3 outputs %+v", outs)
	}
	if r := outs[0].Result; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryFresh ||
		draftOf(t, r) != (orders.Draft{ID: "DRAFT-1", OrderRef: "ORDER-7", Reason: "duplicate"}) {
		t.Errorf("write result %s", outs[0].Raw)
	}
	if !strings.HasPrefix(outs[0].Raw, `{"contract":"tool-model-result-v2","code":"OK"`) {
		t.Errorf("output is not the contract JSON: %s", outs[0].Raw)
	}

	// The human was asked once, about the canonical intent of this run.
	asked := appr.asked()
	if len(asked) != 1 {
		t.Fatalf("approver asked %d times", len(asked))
	}
	req := asked[0]
	fp := guard.Fingerprint(refundTool, []byte(refundArgs))
	op, _ := guard.ScopeIDs(res.RunID, fp)
	if req.CallID != "call_write" || req.Tool != refundTool || string(req.Arguments) != refundArgs ||
		req.Principal.TenantID != "tenant-a" || req.Principal.SubjectID != "user-1" || req.Fingerprint != fp || req.OperationID != op {
		t.Errorf("approval request %+v (want fingerprint %s, op %s)", req, fp, op)
	}

	if got, want := kinds(res.Transcript), "user,call,result,message,call,approval_requested,approved,result,message"; got != want {
		t.Errorf("transcript kinds %s, want %s\n%s", got, want, res.Transcript)
	}
	if len(events) != len(res.Transcript) {
		t.Errorf("observer saw %d events, transcript has %d", len(events), len(res.Transcript))
	}
	for i, e := range res.Transcript {
		wantTurn := map[int]int{0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 3}[i]
		if e.Turn != wantTurn {
			t.Errorf("event %d (%s) in turn %d, want %d", i, e.Kind, e.Turn, wantTurn)
		}
	}
	s := res.Transcript.String()
	for _, want := range []string{
		"user:      Refund my duplicate order ORDER-7.",
		`model:     calls get_order {"order_ref":"ORDER-7"}`,
		`guard:     get_order OK (delivery fresh, recovery none) {"order_ref":"ORDER-7","status":"paid"}`,
		`approval:  create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"} needs a human's yes`,
		"approval:  create_refund_draft approved by ann",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		"assistant: Refund draft DRAFT-1 is created.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}

	// read, write without grant, write with grant.
	if n, err := guard.VerifyAudit(ctx, loop.Store(), "tenant-a"); err != nil || n != 3 {
		t.Errorf("audit: %d records, %v", n, err)
	}
}

// The model asks for the same write again, with other call ids, in the same
// turn and in a later one, with its keys reordered and spaced differently:
// one draft, the repeats are replays, the human is asked once.
func TestDuplicateIntentIsOneSideEffect(t *testing.T) {
	w := newWorld(t,
		calls(
			call("w1", refundTool, refundArgs),
			call("w2", refundTool, refundArgs),
			call("w3", refundTool, "{ \"reason\" : \"duplicate\",\n \"order_ref\" : \"ORDER-7\" }"),
		),
		calls(
			call("w4", refundTool, `{"reason":"duplicate","order_ref":"ORDER-7"}`),
			call("w5", refundTool, refundArgs),
		),
		fakemodel.Turn{Text: "done twice over"},
	)
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	res, err := loop.Run(testCtx(t), user1, "refund ORDER-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Turns != 3 {
		t.Fatalf("status %q turns %d", res.Status, res.Turns)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}
	if n := appr.n.Load(); n != 1 {
		t.Errorf("approver asked %d times, want 1", n)
	}
	checkChain(t, w.srv)
	reqs := w.srv.Requests()
	all := append(outputsOf(t, reqs[1]), outputsOf(t, reqs[2])...)
	if len(all) != 5 {
		t.Fatalf("%d outputs, want 5", len(all))
	}
	for i, o := range all {
		wantID := fmt.Sprintf("w%d", i+1)
		wantDelivery := guard.DeliveryLocalReplay
		if i == 0 {
			wantDelivery = guard.DeliveryFresh
		}
		if o.CallID != wantID || o.Result.Code != guard.CodeOK || o.Result.Delivery != wantDelivery {
			t.Errorf("output %d: %s %s", i, o.CallID, o.Raw)
			continue
		}
		if d := draftOf(t, o.Result); d.ID != "DRAFT-1" {
			t.Errorf("output %d names draft %s", i, d.ID)
		}
	}
}

// One call id twice in one turn is answered once and runs once; reused in a
// later turn it replays, and with another intent it is a conflict.
func TestSameCallIDTwice(t *testing.T) {
	w := newWorld(t,
		calls(
			call("dup", refundTool, refundArgs),
			call("dup", refundTool, refundArgs),
			call("rd", readTool, readArgs),
			call("rd", readTool, `{"order_ref":"ORDER-8"}`),
		),
		calls(
			call("dup", refundTool, refundArgs),
			call("rd", readTool, `{"order_ref":"ORDER-9"}`),
		),
		fakemodel.Turn{Text: "ok"},
	)
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	res, err := loop.Run(testCtx(t), user1, "refund ORDER-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted {
		t.Fatalf("status %q", res.Status)
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("%d side effects, want 1", n)
	}
	if n := w.svc.Calls(); n != 2 {
		t.Errorf("%d service calls, want 2 (one read, one write)", n)
	}
	if n := appr.n.Load(); n != 1 {
		t.Errorf("approver asked %d times, want 1", n)
	}
	checkChain(t, w.srv)
	reqs := w.srv.Requests()
	first := outputsOf(t, reqs[1])
	if len(first) != 2 || first[0].CallID != "dup" || first[1].CallID != "rd" {
		t.Fatalf("turn 2 outputs %+v", first)
	}
	if first[0].Result.Code != guard.CodeOK || first[0].Result.Delivery != guard.DeliveryFresh ||
		first[1].Result.Code != guard.CodeOK || !strings.Contains(string(first[1].Result.Data), "ORDER-7") {
		t.Errorf("turn 2 outputs %s %s", first[0].Raw, first[1].Raw)
	}
	second := byCallID(t, outputsOf(t, reqs[2]))
	if r := second["dup"].Result; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("reused call id, same intent: %s", second["dup"].Raw)
	}
	if r := second["rd"].Result; r.Code != guard.CodeCallIDConflict {
		t.Errorf("reused call id, other intent: %s", second["rd"].Raw)
	}
	var callEvents, resultEvents int
	for _, e := range res.Transcript {
		switch e.Kind {
		case agentloop.EventCall:
			callEvents++
		case agentloop.EventResult:
			resultEvents++
		}
	}
	if callEvents != 6 || resultEvents != 4 {
		t.Errorf("%d call events, %d result events; want 6 and 4", callEvents, resultEvents)
	}
}

// Fifty calls in one turn, good, unknown and broken: one output each, in
// order, with the right code.
func TestFiftyCallsInOneTurn(t *testing.T) {
	type spec struct {
		call fakemodel.Call
		code guard.Code
	}
	var specs []spec
	reads := 0
	for i := range 50 {
		id := fmt.Sprintf("c%02d", i)
		switch i % 5 {
		case 0, 3:
			specs = append(specs, spec{call(id, readTool, readArgs), guard.CodeOK})
			reads++
		case 1:
			specs = append(specs, spec{call(id, fmt.Sprintf("no_such_tool_%d", i), `{}`), guard.CodeUnknownTool})
		case 2:
			broken := []string{`{"order_ref":`, `not json`, ``, `{"order_ref":7}`, `{"order_ref":"ORDER-7","order_ref":"ORDER-7"}`,
				`{"order_ref":"ORDER-7","extra":true}`, `[]`, `"ORDER-7"`, `{"order_ref":"\ud800"}`, `{}`}
			specs = append(specs, spec{call(id, readTool, broken[(i/5)%len(broken)]), guard.CodeInvalidArguments})
		case 4:
			// Another user's order, and a write without approval.
			if i%10 == 4 {
				specs = append(specs, spec{call(id, readTool, `{"order_ref":"ORDER-8"}`), guard.CodeNotFound})
			} else {
				specs = append(specs, spec{call(id, refundTool, refundArgs), guard.CodeApprovalRequired})
			}
		}
	}
	// A repeated call id is answered once.
	cs := make([]fakemodel.Call, 0, 51)
	for _, s := range specs {
		cs = append(cs, s.call)
	}
	cs = append(cs, specs[0].call)
	w := newWorld(t, calls(cs...), fakemodel.Turn{Text: "ok"})
	// A denying approver keeps the writes from pausing the run.
	loop := w.loop(agentloop.Options{Approver: host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
		return host.Decision{Approved: false, Approver: "bob"}, nil
	})})
	res, err := loop.Run(testCtx(t), user1, "many")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "ok" {
		t.Fatalf("status %q output %q", res.Status, res.Output)
	}
	checkChain(t, w.srv)
	outs := outputsOf(t, w.srv.Requests()[1])
	if len(outs) != 50 {
		t.Fatalf("%d outputs, want 50", len(outs))
	}
	byCallID(t, outs)
	for i, o := range outs {
		if o.CallID != specs[i].call.CallID || o.Result.Code != specs[i].code {
			t.Errorf("output %d: call %s (%s %q) got %s, want %s", i, o.CallID, specs[i].call.Name, specs[i].call.Arguments, o.Raw, specs[i].code)
		}
	}
	if n := w.svc.Calls(); n != reads {
		t.Errorf("%d service calls, want %d reads", n, reads)
	}
	if w.svc.SideEffects() != 0 {
		t.Errorf("a denied write ran")
	}
}

// A model that never stops calling tools is stopped at the turn limit.
func TestMaxTurns(t *testing.T) {
	var turns []fakemodel.Turn
	for range 10 {
		turns = append(turns, fakemodel.Turn{Text: "again", Calls: []fakemodel.Call{{Name: readTool, Arguments: readArgs}}})
	}
	w := newWorld(t, turns...)
	loop := w.loop(agentloop.Options{MaxTurns: 3})
	res, err := loop.Run(testCtx(t), user1, "loop forever")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusMaxTurns || res.Turns != 3 || res.Output != "" {
		t.Fatalf("status %q turns %d output %q", res.Status, res.Turns, res.Output)
	}
	if n := len(w.srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if w.srv.Remaining() != 7 {
		t.Errorf("%d turns left, want 7", w.srv.Remaining())
	}
	checkChain(t, w.srv)
	if n := w.svc.Calls(); n != 3 {
		t.Errorf("%d reads, want 3", n)
	}
}

// The default turn limit holds too.
func TestDefaultMaxTurns(t *testing.T) {
	w := newWorld(t)
	for range agentloop.DefaultMaxTurns + 2 {
		w.srv.Enqueue(calls(fakemodel.Call{Name: readTool, Arguments: readArgs}))
	}
	res, err := w.loop().Run(testCtx(t), user1, "loop forever")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusMaxTurns || res.Turns != agentloop.DefaultMaxTurns {
		t.Fatalf("status %q turns %d", res.Status, res.Turns)
	}
}

// A run restarted with the same run id replays its writes; another run id is
// another operation.
func TestRunIDReplay(t *testing.T) {
	script := func() []fakemodel.Turn {
		return []fakemodel.Turn{
			calls(fakemodel.Call{Name: refundTool, Arguments: refundArgs}),
			{Text: "refunded"},
		}
	}
	run := func(t *testing.T, w *world, loop *agentloop.Loop, runID string) guard.Result {
		t.Helper()
		n := len(w.srv.Requests())
		w.srv.Enqueue(script()...)
		res, err := loop.Run(testCtx(t), user1, "refund ORDER-7", agentloop.RunOptions{RunID: runID})
		if err != nil {
			t.Fatal(err)
		}
		if res.RunID != runID || res.Status != agentloop.StatusCompleted {
			t.Fatalf("run id %q status %q", res.RunID, res.Status)
		}
		outs := outputsOf(t, w.srv.Requests()[n+1])
		if len(outs) != 1 {
			t.Fatalf("%d outputs", len(outs))
		}
		return outs[0].Result
	}

	t.Run("same", func(t *testing.T) {
		w := newWorld(t)
		appr := &approver{}
		loop := w.loop(agentloop.Options{Approver: appr})
		a := run(t, w, loop, "run-fixed")
		b := run(t, w, loop, "run-fixed")
		if w.svc.SideEffects() != 1 {
			t.Errorf("%d side effects, want 1", w.svc.SideEffects())
		}
		if a.Delivery != guard.DeliveryFresh || b.Code != guard.CodeOK || b.Delivery != guard.DeliveryLocalReplay ||
			string(a.Data) != string(b.Data) {
			t.Errorf("first %+v, second %+v", a, b)
		}
		if appr.n.Load() != 1 {
			t.Errorf("approver asked %d times, want 1", appr.n.Load())
		}
		// Another process restarting the run (a new loop, a new provider
		// that reuses the call ids) replays too.
		w2 := newWorld(t)
		w2.svc, w2.rdb = w.svc, w.rdb
		c := run(t, w2, w2.loop(agentloop.Options{Approver: appr}), "run-fixed")
		if c.Delivery != guard.DeliveryLocalReplay || w.svc.SideEffects() != 1 {
			t.Errorf("third run: %+v, %d side effects", c, w.svc.SideEffects())
		}
	})
	t.Run("different", func(t *testing.T) {
		w := newWorld(t)
		loop := w.loop(agentloop.Options{Approver: &approver{}})
		a := run(t, w, loop, "run-one")
		b := run(t, w, loop, "run-two")
		if w.svc.SideEffects() != 2 {
			t.Errorf("%d side effects, want 2", w.svc.SideEffects())
		}
		if a.Delivery != guard.DeliveryFresh || b.Delivery != guard.DeliveryFresh || draftOf(t, b).ID != "DRAFT-2" {
			t.Errorf("first %+v, second %+v", a, b)
		}
	})
	t.Run("random", func(t *testing.T) {
		w := newWorld(t)
		loop := w.loop(agentloop.Options{Approver: &approver{}})
		var ids []string
		for range 2 {
			w.srv.Enqueue(script()...)
			res, err := loop.Run(testCtx(t), user1, "refund ORDER-7")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.RunID)
		}
		if ids[0] == ids[1] || w.svc.SideEffects() != 2 {
			t.Errorf("run ids %v, %d side effects", ids, w.svc.SideEffects())
		}
	})
}

// Several runs of one loop at once, all with the same run id, against one
// provider: the write still runs once.
func TestConcurrentRunsSameRunID(t *testing.T) {
	const runs = 8
	w := newWorld(t)
	for range 2 * runs {
		w.srv.Enqueue(fakemodel.Turn{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			if outs := lastOutputs(req); len(outs) > 0 {
				return &fakemodel.Turn{Text: outs[0].Code.String() + " " + string(outs[0].Delivery)}
			}
			return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: refundTool, Arguments: refundArgs}}}
		}})
	}
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr})
	var wg sync.WaitGroup
	results := make([]*agentloop.RunResult, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			results[i], errs[i] = loop.Run(testCtx(t), user1, "refund ORDER-7", agentloop.RunOptions{RunID: "run-shared"})
		})
	}
	wg.Wait()
	fresh := 0
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if results[i].Status != agentloop.StatusCompleted {
			t.Fatalf("run %d: status %q", i, results[i].Status)
		}
		switch results[i].Output {
		case "OK fresh":
			fresh++
		case "OK local_replay", "IN_PROGRESS fresh":
		default:
			t.Errorf("run %d: %q", i, results[i].Output)
		}
	}
	if fresh != 1 || w.svc.SideEffects() != 1 {
		t.Errorf("%d fresh results, %d side effects; want 1 and 1", fresh, w.svc.SideEffects())
	}
	if _, err := guard.VerifyAudit(testCtx(t), loop.Store(), "tenant-a"); err != nil {
		t.Error(err)
	}
}

// A tool named like the status tool is a configuration error.
func TestStatusToolNameClash(t *testing.T) {
	clash := toolset.Read(toolset.StatusToolName, "clash", func(context.Context, *guard.Invocation, toolset.StatusInput) (string, error) { return "x", nil }, nil)

	w := newWorld(t, fakemodel.Turn{Text: "never"})
	loop := agentloop.New(model(w.client), toolset.MustNew(clash), agentloop.Options{Store: w.store()})
	if loop.Err() == nil {
		t.Fatal("no configuration error")
	}
	res, err := loop.Run(testCtx(t), user1, "hi")
	if err == nil || res != nil {
		t.Fatalf("Run = %v, %v", res, err)
	}
	if _, err := loop.QueryStatus(testCtx(t), user1, "op_x"); err == nil {
		t.Error("QueryStatus worked on a misconfigured loop")
	}
	if _, err := loop.Grant(host.ApprovalRequest{}, "ann"); err == nil {
		t.Error("Grant worked on a misconfigured loop")
	}
	if _, err := loop.Resume(testCtx(t), user1, &agentloop.State{}); err == nil {
		t.Error("Resume worked on a misconfigured loop")
	}
	if n := len(w.srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}

	// Renaming the status tool, or removing it, resolves the clash.
	for _, name := range []string{"-", "settle_operation"} {
		w := newWorld(t, calls(call("c1", toolset.StatusToolName, `{"operation_id":"op_1","tool":null}`)), fakemodel.Turn{Text: "ok"})
		loop := agentloop.New(model(w.client), toolset.MustNew(clash), agentloop.Options{Store: w.store(), StatusTool: name})
		res, err := loop.Run(testCtx(t), user1, "hi")
		if err != nil {
			t.Fatalf("status tool %q: %v", name, err)
		}
		want := toolset.StatusToolName
		if name != "-" {
			want += "," + name
		}
		if got := strings.Join(w.srv.Requests()[0].ToolNames(), ","); got != want {
			t.Errorf("tools %s, want %s", got, want)
		}
		if o := outputsOf(t, w.srv.Requests()[1]); len(o) != 1 || o[0].Result.Code != guard.CodeOK || string(o[0].Result.Data) != `"x"` {
			t.Errorf("the host's tool was not called: %+v (%s)", o, res.Transcript)
		}
	}
}

// A store that cannot be set up is a configuration error, and so is a bad
// principal.
func TestRunErrors(t *testing.T) {
	w := newWorld(t, fakemodel.Turn{Text: "never"})
	loop := w.loop()
	for _, p := range []guard.Principal{{}, {TenantID: "tenant-a"}, {SubjectID: "user-1"}, {TenantID: "t", SubjectID: "\xff"}} {
		if res, err := loop.Run(testCtx(t), p, "hi"); err == nil || res != nil {
			t.Errorf("principal %+v: Run = %v, %v", p, res, err)
		}
	}
	if n := len(w.srv.Requests()); n != 0 {
		t.Errorf("%d requests sent for bad principals", n)
	}
	// Without Options.Store the loop makes its own store.
	own := agentloop.New(model(w.client), orders.Tools(w.svc), agentloop.Options{Approver: &approver{}})
	res, err := own.Run(testCtx(t), user1, "hi")
	if err != nil || res.Output != "never" {
		t.Fatalf("embedded store: %v, %v", res, err)
	}
	if _, ok := own.Store().(*guard.MemStore); !ok {
		t.Fatalf("the loop's own store is a %T, want a guard.MemStore", own.Store())
	}
}

// A host Options.Keys sees the canonical arguments on every path, so the
// operation id an approval request names is the one the guard uses, and the
// same intent spelled differently is one operation.
func TestHostKeys(t *testing.T) {
	w := newWorld(t,
		calls(call("w1", refundTool, `{"reason":"duplicate", "order_ref":"ORDER-7"}`)),
		calls(call("w2", refundTool, refundArgs)),
		fakemodel.Turn{Text: "ok"},
	)
	w.svc.FailNext(orders.FailAfterCommit)
	var (
		mu   sync.Mutex
		seen []string
	)
	keys := func(runID string, c guard.Proposal, fp string) (string, string) {
		mu.Lock()
		seen = append(seen, string(c.Arguments))
		mu.Unlock()
		// Byte-sensitive on purpose.
		h := sha256.Sum256([]byte(runID + "\x00" + c.Name + "\x00" + string(c.Arguments)))
		id := "host_" + hex.EncodeToString(h[:12])
		return id, "key_" + id
	}
	appr := &approver{}
	loop := w.loop(agentloop.Options{Approver: appr, Keys: keys})
	res, err := loop.Run(testCtx(t), user1, "refund", agentloop.RunOptions{RunID: "run-host"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted {
		t.Fatalf("status %q", res.Status)
	}
	mu.Lock()
	for _, a := range seen {
		if a != refundArgs {
			t.Errorf("Keys saw arguments %s, want the canonical %s", a, refundArgs)
		}
	}
	mu.Unlock()
	asked := appr.asked()
	if len(asked) != 1 {
		t.Fatalf("approver asked %d times", len(asked))
	}
	wantOp, _ := keys("run-host", guard.Proposal{Name: refundTool, Arguments: []byte(refundArgs)}, "")
	reqs := w.srv.Requests()
	unknown := outputsOf(t, reqs[1])[0].Result
	if unknown.Code != guard.CodeOutcomeUnknown || unknown.OperationID != asked[0].OperationID || unknown.OperationID != wantOp {
		t.Errorf("result names operation %q, approval request %q, want %q", unknown.OperationID, asked[0].OperationID, wantOp)
	}
	// The repeat (canonical spelling) is the same operation: still unknown,
	// never run again.
	if again := outputsOf(t, reqs[2])[0].Result; again.Code != guard.CodeOutcomeUnknown || again.OperationID != wantOp {
		t.Errorf("repeat: %+v", again)
	}
	if w.svc.SideEffects() != 1 {
		t.Errorf("%d side effects", w.svc.SideEffects())
	}
	if r, err := loop.QueryStatus(testCtx(t), user1, asked[0].OperationID); err != nil || r.Code != guard.CodeOK ||
		r.Delivery != guard.DeliveryReceiptReconciled {
		t.Errorf("status of the approval request's operation: %v, %v", r, err)
	}
}

// The loop's clock and signer are the guard's: given in Options or in
// Options.Guard, the loop uses them; given in both, differently, New says
// so instead of quietly overwriting one.
func TestGuardClockAndSignerInOnePlace(t *testing.T) {
	w := newWorld(t)
	a, _ := guard.NewSigner(bytes.Repeat([]byte("a"), 32))
	b, _ := guard.NewSigner(bytes.Repeat([]byte("b"), 32))
	only := agentloop.New(model(w.client), orders.Tools(w.svc), agentloop.Options{Guard: guard.Options{Signer: a}})
	if only.Err() != nil || only.Signer() != a {
		t.Fatalf("Guard.Signer alone: err %v, signer %p, want %p", only.Err(), only.Signer(), a)
	}
	if l := agentloop.New(model(w.client), orders.Tools(w.svc), agentloop.Options{Signer: a, Guard: guard.Options{Signer: a}}); l.Err() != nil {
		t.Fatalf("the same signer twice: %v", l.Err())
	}
	if l := agentloop.New(model(w.client), orders.Tools(w.svc), agentloop.Options{Signer: a, Guard: guard.Options{Signer: b}}); l.Err() == nil {
		t.Fatal("two signers: no configuration error")
	}
	if l := agentloop.New(model(w.client), orders.Tools(w.svc), agentloop.Options{Clock: guard.SystemClock, Guard: guard.Options{Clock: guard.SystemClock}}); l.Err() == nil {
		t.Fatal("two clocks: no configuration error")
	}
}
