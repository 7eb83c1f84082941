package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

var (
	userA = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	userB = guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}
)

const refundArgs = `{"order_ref":"ORDER-7","reason":"duplicate"}`

type world struct {
	svc   *orders.Service
	store *guard.MemStore
	g     *guard.Guard
	h     *host.Host
}

func newWorld(t *testing.T, configure ...func(*host.Options)) *world {
	t.Helper()
	signer, err := guard.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{svc: orders.NewService(), store: guard.NewMemStore(guard.MemStoreOptions{})}
	tools := orders.Tools(w.svc)
	w.g = guard.New(tools, w.store, guard.Options{Signer: signer})
	opts := host.Options{Provider: "test", APIFamily: "test-tools", AdapterRevision: "test-v1", Signer: signer}
	for _, c := range configure {
		c(&opts)
	}
	if w.h, err = host.New(w.g, tools, opts); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) call(t *testing.T, ctx context.Context, name, args, callID string) guard.Call {
	t.Helper()
	c, err := w.h.Call(ctx, host.Frame{Name: name, Arguments: []byte(args), CallID: callID})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func session(p guard.Principal, scope string) context.Context {
	return host.WithScope(host.WithPrincipal(context.Background(), p), scope)
}

// TestCall: the principal and the scope come from the context; a call
// without a principal, or whose host function panics, is an error and
// names nothing of the panic.
func TestCall(t *testing.T) {
	w := newWorld(t)
	c := w.call(t, session(userA, "s1"), "get_order", `{"order_ref":"ORDER-7"}`, "call-1")
	if c.Principal.SubjectID != "user-1" || c.Context.Scope != "s1" || c.Context.CallID != "call-1" || c.Context.Provider != "test" {
		t.Errorf("call = %+v", c)
	}
	if _, err := w.h.Call(context.Background(), host.Frame{Name: "get_order"}); !errors.Is(err, host.ErrNoPrincipal) {
		t.Errorf("no principal: %v, want ErrNoPrincipal", err)
	}
	p := newWorld(t, func(o *host.Options) { o.Scope = func(context.Context) string { panic("secret-session-token") } })
	_, err := p.h.Call(session(userA, "s1"), host.Frame{Name: "get_order"})
	if !errors.Is(err, host.ErrHostPanic) || strings.Contains(err.Error(), "secret-session-token") {
		t.Errorf("scope panic: %v, want ErrHostPanic without the panic's value", err)
	}
	// No arguments are an empty object.
	if c := w.call(t, session(userA, "s1"), "get_order", "", "c"); string(c.Proposal.Arguments) != "{}" {
		t.Errorf("empty arguments = %q", c.Proposal.Arguments)
	}
}

// TestAskThenDecide: a write that waits for a human comes back as Ask;
// the yes runs it once, and deciding again (a framework that resumes the
// same call twice) replays instead of running again.
func TestAskThenDecide(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "s1")
	c := w.call(t, ctx, "create_refund_draft", refundArgs, "call-1")
	a, err := w.h.Answer(ctx, c)
	if err != nil || a.Ask == nil || a.Result != nil {
		t.Fatalf("answer = %+v, %v; want a question", a, err)
	}
	if a.Ask.Tool != "create_refund_draft" || a.Ask.RunID != "s1" || a.Ask.Fingerprint != guard.Fingerprint(c.Proposal.Name, c.Proposal.Arguments) {
		t.Errorf("ask = %+v", a.Ask)
	}
	pending := host.PendingOf(*a.Ask)
	for i := range 2 {
		res, err := w.h.Decide(ctx, c, pending, host.Decision{Approved: true, Approver: "boss"})
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("decide %d: %v, %v", i, res, err)
		}
		if want := []guard.Delivery{guard.DeliveryFresh, guard.DeliveryLocalReplay}[i]; res.Delivery != want {
			t.Errorf("decide %d: delivery %s, want %s", i, res.Delivery, want)
		}
	}
	if n := w.svc.SideEffects(); n != 1 {
		t.Errorf("side effects = %d, want 1", n)
	}
	// A no after the yes ran: the model is told what happened, not a
	// refusal.
	res, err := w.h.Decide(ctx, c, pending, host.Decision{Approved: false})
	if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Errorf("no after yes = %v, %v; want the replayed outcome", res, err)
	}
}

// TestDecideOtherCall: a decision about another principal or other
// arguments runs nothing.
func TestDecideOtherCall(t *testing.T) {
	w := newWorld(t)
	ctx := session(userA, "s1")
	c := w.call(t, ctx, "create_refund_draft", refundArgs, "call-1")
	a, _ := w.h.Answer(ctx, c)
	pending := host.PendingOf(*a.Ask)
	other := c
	other.Principal = guard.Principal{TenantID: "tenant-a", SubjectID: "user-2"}
	if _, err := w.h.Decide(ctx, other, pending, host.Decision{Approved: true}); !errors.Is(err, host.ErrOtherCall) {
		t.Errorf("another principal: %v, want ErrOtherCall", err)
	}
	changed := w.call(t, ctx, "create_refund_draft", `{"order_ref":"ORDER-7","reason":"damaged"}`, "call-1")
	if _, err := w.h.Decide(ctx, changed, pending, host.Decision{Approved: true}); !errors.Is(err, host.ErrOtherCall) {
		t.Errorf("other arguments: %v, want ErrOtherCall", err)
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
}

// TestNoIsKeptForTheScope: a human's no is told once and answers the same
// intent in the same scope without asking again; an expired request, or
// another scope, is asked again.
func TestNoIsKeptForTheScope(t *testing.T) {
	var asked atomic.Int32
	answer := host.Decision{Approved: false, Reason: "not today"}
	w := newWorld(t, func(o *host.Options) {
		o.Approver = host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
			asked.Add(1)
			return answer, nil
		})
	})
	ask := func(scope, callID string) *guard.Result {
		ctx := session(userA, scope)
		a, err := w.h.Answer(ctx, w.call(t, ctx, "create_refund_draft", refundArgs, callID))
		if err != nil || a.Result == nil {
			t.Fatalf("answer = %+v, %v", a, err)
		}
		return a.Result
	}
	if r := ask("s1", "c1"); r.Code != guard.CodeApprovalRequired || !strings.Contains(r.Message, "not today") {
		t.Errorf("first no = %v", r)
	}
	if r := ask("s1", "c2"); r.Code != guard.CodeApprovalRequired || asked.Load() != 1 {
		t.Errorf("same intent, same scope: %v, asked %d times; want the no without asking", r, asked.Load())
	}
	ask("s2", "c3")
	if asked.Load() != 2 {
		t.Errorf("another scope: asked %d times, want 2", asked.Load())
	}
	answer = host.Decision{Approved: false, Expired: true}
	ask("s3", "c4")
	ask("s3", "c5")
	if asked.Load() != 4 {
		t.Errorf("expired requests: asked %d times, want 4 (an expiry is no human's no)", asked.Load())
	}
	if n := w.svc.SideEffects(); n != 0 {
		t.Errorf("side effects = %d, want 0", n)
	}
}

// TestApproverFailure: an approver that fails or panics decides nothing:
// a denial this time, nothing run, and the intent asked again later.
func TestApproverFailure(t *testing.T) {
	var asked atomic.Int32
	w := newWorld(t, func(o *host.Options) {
		o.Approver = host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
			if asked.Add(1) == 1 {
				panic("inbox down")
			}
			return host.Decision{}, errors.New("inbox down")
		})
	})
	ctx := session(userA, "s1")
	for i := range 2 {
		a, err := w.h.Answer(ctx, w.call(t, ctx, "create_refund_draft", refundArgs, "c"))
		if err != nil || a.Result == nil || a.Result.Code != guard.CodeApprovalRequired {
			t.Errorf("answer %d = %+v, %v", i, a, err)
		}
	}
	if asked.Load() != 2 || w.svc.SideEffects() != 0 {
		t.Errorf("asked %d, side effects %d; want 2 and 0", asked.Load(), w.svc.SideEffects())
	}
}

// TestExpiredIsNotADenial: an approval nobody decided in time reaches the
// model in its own words (guard.ExpiredMessage), not as a human's no,
// whether the host asked inline (an Approver that says Expired, or whose
// wait ran out) or the framework resumed with an expired Decision; nothing
// runs, and the intent is asked again.
func TestExpiredIsNotADenial(t *testing.T) {
	wantExpired := func(t *testing.T, res *guard.Result) {
		t.Helper()
		if res == nil || res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
			t.Errorf("result %v, want APPROVAL_REQUIRED with the expired message %q", res, guard.ExpiredMessage)
		}
	}
	for name, approve := range map[string]func() (host.Decision, error){
		"expired":      func() (host.Decision, error) { return host.Decision{Expired: true, Reason: "timed out"}, nil },
		"wait ran out": func() (host.Decision, error) { return host.Decision{}, context.DeadlineExceeded },
	} {
		t.Run("inline/"+name, func(t *testing.T) {
			var asked atomic.Int32
			w := newWorld(t, func(o *host.Options) {
				o.Approver = host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
					asked.Add(1)
					return approve()
				})
			})
			ctx := session(userA, "s1")
			for i := range 2 {
				a, err := w.h.Answer(ctx, w.call(t, ctx, "create_refund_draft", refundArgs, fmt.Sprintf("c%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				wantExpired(t, a.Result)
			}
			if asked.Load() != 2 || w.svc.SideEffects() != 0 {
				t.Errorf("asked %d, side effects %d; want 2 (an expiry is no no) and 0", asked.Load(), w.svc.SideEffects())
			}
		})
	}
	t.Run("resumed", func(t *testing.T) {
		w := newWorld(t)
		ctx := session(userA, "s1")
		c := w.call(t, ctx, "create_refund_draft", refundArgs, "call-1")
		a, err := w.h.Answer(ctx, c)
		if err != nil || a.Ask == nil {
			t.Fatalf("answer = %+v, %v; want a question", a, err)
		}
		res, err := w.h.Decide(ctx, c, host.PendingOf(*a.Ask), host.Decision{Expired: true, Reason: "timed out"})
		if err != nil {
			t.Fatal(err)
		}
		wantExpired(t, res)
		if a, err := w.h.Answer(ctx, w.call(t, ctx, "create_refund_draft", refundArgs, "call-2")); err != nil || a.Ask == nil {
			t.Errorf("after the expiry: %+v, %v; want the question asked again", a, err)
		}
	})
}

// TestStatusToolAnswersForItsPrincipal: the status tool asks for the
// call's principal: another tenant's operation is NOT_FOUND.
func TestStatusToolAnswersForItsPrincipal(t *testing.T) {
	w := newWorld(t, func(o *host.Options) { o.Signer = nil })
	ctx := session(userA, "s1")
	c := w.call(t, ctx, "get_order", `{"order_ref":"ORDER-7"}`, "call-read")
	if a, err := w.h.Answer(ctx, c); err != nil || a.Result.Code != guard.CodeOK {
		t.Fatalf("read = %+v, %v", a, err)
	}
	query := func(ctx context.Context) *guard.Result {
		b, _ := json.Marshal(map[string]any{"operation_id": "call-read", "tool": nil})
		a, err := w.h.Answer(ctx, w.call(t, ctx, toolset.StatusToolName, string(b), "call-status"))
		if err != nil || a.Result == nil {
			t.Fatalf("status = %+v, %v", a, err)
		}
		return a.Result
	}
	if r := query(ctx); r.Code != guard.CodeOK {
		t.Errorf("own operation: %v", r)
	}
	if r := query(session(userB, "s1")); r.Code != guard.CodeNotFound {
		t.Errorf("another tenant's operation: %v, want NOT_FOUND", r)
	}
	// Without a signer nobody is asked: the model is told approval is
	// required.
	a, err := w.h.Answer(ctx, w.call(t, ctx, "create_refund_draft", refundArgs, "w"))
	if err != nil || a.Ask != nil || a.Result.Code != guard.CodeApprovalRequired {
		t.Errorf("write without a signer = %+v, %v", a, err)
	}
}

// TestNewRefuses: configurations that would leave calls unguarded or
// unanswerable.
func TestNewRefuses(t *testing.T) {
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	cases := map[string]func() error{
		"no guard": func() error { _, err := host.New(nil, tools, host.Options{}); return err },
		"other tools": func() error {
			_, err := host.New(guard.New(orders.NoopTools(), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{}), tools, host.Options{})
			return err
		},
		"status name":      func() error { _, err := host.New(g, tools, host.Options{StatusTool: "get_order"}); return err },
		"bad status name":  func() error { _, err := host.New(g, tools, host.Options{StatusTool: "no spaces, please"}); return err },
		"approver, signer": func() error { _, err := host.New(g, tools, host.Options{Approver: host.ApproverFunc(nil)}); return err },
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestImport: an imported tool is a write that needs approval by default,
// validates its arguments against its schema, carries the invocation in
// its context, and a panic in it is its failure, not the host's.
func TestImport(t *testing.T) {
	if _, err := host.Import("x", func(context.Context, *guard.Invocation) (json.RawMessage, error) { return nil, nil }, host.ImportOptions{}); err == nil {
		t.Error("Import without Authorize")
	}
	allow := func(context.Context, string, *guard.Invocation) error { return nil }
	if _, err := host.Import("x", func(context.Context, *guard.Invocation) (json.RawMessage, error) { return nil, nil }, host.ImportOptions{Schema: json.RawMessage(`{"type":"nope"}`), Authorize: allow}); err == nil {
		t.Error("Import of a schema that does not compile")
	}
	var ran atomic.Int32
	it, err := host.Import("send_mail",
		func(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
			if host.InvocationFrom(ctx) != inv {
				t.Error("the tool's context does not carry its invocation")
			}
			if ran.Add(1) == 2 {
				panic("smtp")
			}
			return json.RawMessage(`{"sent":true}`), nil
		}, host.ImportOptions{Description: "Sends a mail.", Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`),
			Authorize: allow, NoApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := it.Spec(); s.Effect != guard.Write || s.NeedsApproval {
		t.Errorf("spec = %+v", s)
	}
	set, err := toolset.New(it)
	if err != nil {
		t.Fatal(err)
	}
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	h, err := host.New(g, set, host.Options{NoStatusTool: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := session(userA, "s1")
	answer := func(args, callID string) *guard.Result {
		c, err := h.Call(ctx, host.Frame{Name: "send_mail", Arguments: []byte(args), CallID: callID})
		if err != nil {
			t.Fatal(err)
		}
		a, err := h.Answer(ctx, c)
		if err != nil || a.Result == nil {
			t.Fatalf("answer = %+v, %v", a, err)
		}
		return a.Result
	}
	if r := answer(`{"to":1}`, "c0"); r.Code != guard.CodeInvalidArguments {
		t.Errorf("bad arguments: %v", r)
	}
	if r := answer(`{"to":"a@example.com"}`, "c1"); r.Code != guard.CodeOK {
		t.Errorf("send: %v", r)
	}
	if r := answer(`{"to":"b@example.com"}`, "c2"); r.Code != guard.CodeOutcomeUnknown {
		t.Errorf("a panicking write: %v, want OUTCOME_UNKNOWN", r)
	}
}

// TestMapRoundTrip: Map and ModelResult carry a model result through a
// framework's JSON object unchanged, numbers with their digits.
func TestMapRoundTrip(t *testing.T) {
	res := &guard.Result{Code: guard.CodeOK, Delivery: guard.DeliveryFresh, Data: json.RawMessage(`{"amount":12345678901234567890}`)}
	m := host.Map(res)
	back, err := host.ModelResult(m)
	if err != nil || back.Code != guard.CodeOK || string(back.Data) != `{"amount":12345678901234567890}` {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if _, err := host.ModelResult(map[string]any{"nope": 1}); err == nil {
		t.Error("ModelResult accepted an object that is not a model result")
	}
}
