package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// The code table of the contract (SPEC section 2).
func TestCodeTable(t *testing.T) {
	want := map[string][3]string{
		"OK":                     {"succeeded", "committed", "none"},
		"NOT_FOUND":              {"failed", "not_started", "none"},
		"UNKNOWN_TOOL":           {"failed", "not_started", "correct_input"},
		"INVALID_ARGUMENTS":      {"failed", "not_started", "correct_input"},
		"APPROVAL_REQUIRED":      {"failed", "not_started", "request_approval"},
		"APPROVAL_INVALID":       {"failed", "not_started", "request_approval"},
		"IDEMPOTENCY_CONFLICT":   {"failed", "not_started", "human_review"},
		"CALL_ID_CONFLICT":       {"failed", "not_started", "human_review"},
		"TIMEOUT_BEFORE_EXECUTE": {"failed", "not_started", "retry_after"},
		"RATE_LIMIT":             {"failed", "not_started", "retry_after"},
		"OUTCOME_UNKNOWN":        {"unknown", "unknown", "query_status"},
		"IN_PROGRESS":            {"unknown", "unknown", "retry_after"},
		"UNAVAILABLE":            {"failed", "not_started", "retry_after"},
		// The project's extension (docs/contract.md, budgets).
		"BUDGET_EXHAUSTED": {"failed", "not_started", "none"},
	}
	codes := guard.Codes()
	if len(codes) != len(want) {
		t.Fatalf("%d codes, the contract has %d", len(codes), len(want))
	}
	for _, c := range codes {
		w, ok := want[c.String()]
		if !ok {
			t.Fatalf("code %s is not in the contract", c)
		}
		if got := [3]string{string(c.Status()), string(c.Outcome()), string(c.Recovery())}; got != w {
			t.Errorf("%s: %v, want %v", c, got, w)
		}
		if p, ok := guard.ParseCode(c.String()); !ok || p != c {
			t.Errorf("ParseCode(%s) = %v, %v", c, p, ok)
		}
	}
	if _, ok := guard.ParseCode("ok"); ok {
		t.Error("codes are case-sensitive")
	}
	if guard.Code(0).Valid() || guard.Code(200).Valid() {
		t.Error("zero and out-of-range codes must be invalid")
	}
}

func TestResultJSON(t *testing.T) {
	cases := []struct {
		res  guard.Result
		want string
	}{
		{guard.Result{Code: guard.CodeOK, Delivery: guard.DeliveryFresh, Data: json.RawMessage(`{"a":1}`)},
			`{"contract":"tool-model-result-v2","code":"OK","status":"succeeded","outcome":"committed","recovery":"none","delivery":"fresh","data":{"a":1}}`},
		{guard.Result{Code: guard.CodeRateLimit, Message: "slow \"down\"", RetryAfter: 1500 * time.Millisecond, OperationID: "op"},
			`{"contract":"tool-model-result-v2","code":"RATE_LIMIT","status":"failed","outcome":"not_started","recovery":"retry_after","delivery":"fresh","data":null,"message":"slow \"down\"","retry_after_ms":1500}`},
		{guard.Result{Code: guard.CodeOutcomeUnknown, OperationID: "op-1", RetryAfter: time.Second},
			`{"contract":"tool-model-result-v2","code":"OUTCOME_UNKNOWN","status":"unknown","outcome":"unknown","recovery":"query_status","delivery":"fresh","data":null,"operation_id":"op-1"}`},
		{guard.Result{Code: guard.CodeNotFound, Message: "bad \xff utf8"},
			`{"contract":"tool-model-result-v2","code":"NOT_FOUND","status":"failed","outcome":"not_started","recovery":"none","delivery":"fresh","data":null,"message":"bad ` + "\uFFFD" + ` utf8"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(&c.res)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("got  %s\nwant %s", b, c.want)
		}
		var back guard.Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if back.Code != c.res.Code || back.String() != string(b) {
			t.Errorf("round trip: %s", back.String())
		}
	}
	bad := `{"contract":"tool-model-result-v2","code":"OK","status":"failed","outcome":"committed","recovery":"none","delivery":"fresh","data":null}`
	var r guard.Result
	if err := json.Unmarshal([]byte(bad), &r); err == nil {
		t.Error("a result whose status contradicts its code must not decode")
	}
}

func TestFingerprint(t *testing.T) {
	base := guard.Fingerprint("t", []byte(`{"a":1,"b":[1,2],"c":{"x":"y"}}`))
	same := []string{
		`{"c":{"x":"y"},"b":[1,2],"a":1}`,
		"{ \"a\" : 1.0 ,\n \"b\":[1e0, 2], \"c\":{\"x\":\"\\u0079\"}}",
	}
	for _, s := range same {
		if got := guard.Fingerprint("t", []byte(s)); got != base {
			t.Errorf("%s: fingerprint differs from the canonical form's", s)
		}
	}
	different := []struct{ name, args string }{
		{"u", `{"a":1,"b":[1,2],"c":{"x":"y"}}`},
		{"t", `{"a":2,"b":[1,2],"c":{"x":"y"}}`},
		{"t", `{"a":1,"b":[2,1],"c":{"x":"y"}}`},
		{"t", `{"a":"1","b":[1,2],"c":{"x":"y"}}`},
	}
	for _, d := range different {
		if guard.Fingerprint(d.name, []byte(d.args)) == base {
			t.Errorf("%s %s: same fingerprint as a different intent", d.name, d.args)
		}
	}
	// Invalid JSON is fingerprinted by its raw text: stable and distinct.
	a, b := guard.Fingerprint("t", []byte(`{"a":`)), guard.Fingerprint("t", []byte(`{"a":`))
	if a != b || a == guard.Fingerprint("t", []byte(`{"b":`)) || len(a) != 64 {
		t.Error("invalid arguments must fingerprint stably by their text")
	}
}

func TestSigner(t *testing.T) {
	if _, err := guard.NewSigner([]byte("short")); !errors.Is(err, guard.ErrShortKey) {
		t.Fatalf("short key: %v", err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	s, _ := guard.NewSigner(key)
	other, _ := guard.NewSigner([]byte("fedcba9876543210fedcba9876543210"))
	p := guard.Principal{TenantID: "t", SubjectID: "u"}
	prop := guard.Proposal{Name: "refund", Arguments: []byte(`{"order":"o-1"}`)}
	now := time.Unix(1000, 0)
	g := guard.NewGrant(p, prop, "ann", now, time.Minute)
	tok, err := s.Sign(g)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Check(tok, p, prop, now); err != nil || got.Approver != "ann" || got.ID != g.ID {
		t.Fatalf("valid grant: %+v, %v", got, err)
	}
	fail := map[string]func() error{
		"expired at ExpiresAt": func() error { _, err := s.Check(tok, p, prop, now.Add(time.Minute)); return err },
		"other subject": func() error {
			_, err := s.Check(tok, guard.Principal{TenantID: "t", SubjectID: "v"}, prop, now)
			return err
		},
		"other tenant": func() error {
			_, err := s.Check(tok, guard.Principal{TenantID: "t2", SubjectID: "u"}, prop, now)
			return err
		},
		"other tool": func() error {
			_, err := s.Check(tok, p, guard.Proposal{Name: "refund2", Arguments: prop.Arguments}, now)
			return err
		},
		"other intent": func() error {
			_, err := s.Check(tok, p, guard.Proposal{Name: "refund", Arguments: []byte(`{"order":"o-2"}`)}, now)
			return err
		},
		"other key":         func() error { _, err := other.Check(tok, p, prop, now); return err },
		"garbage":           func() error { _, err := s.Check("tg1.???.???", p, prop, now); return err },
		"empty":             func() error { _, err := s.Check("", p, prop, now); return err },
		"tampered payload":  func() error { _, err := s.Check(tamper(tok), p, prop, now); return err },
		"no signature part": func() error { _, err := s.Check("tg1.", p, prop, now); return err },
	}
	for name, f := range fail {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// tamper re-encodes the grant with a later expiry but keeps the signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	return parts[0] + "." + strings.ToUpper(parts[1][:1]) + parts[1][1:] + "." + parts[2]
}

func newGuard(t *testing.T, tools *toolset.Set, opts guard.Options) (*guard.Guard, guard.Store) {
	t.Helper()
	_, rdb := redistest.Mini(t)
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return guard.New(tools, s, opts), s
}

type in struct {
	N int8 `json:"n"`
}

func dispatch(t *testing.T, g *guard.Guard, tool, args, call string) *guard.Result {
	t.Helper()
	res, err := g.Dispatch(context.Background(), guard.Call{
		Principal: guard.Principal{TenantID: "TENANT-SECRET", SubjectID: "SUBJECT-SECRET"},
		Proposal:  guard.Proposal{Name: tool, Arguments: []byte(args)},
		Context:   guard.ExecutionContext{CallID: call},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.String(); strings.Contains(s, "SECRET") {
		t.Fatalf("result leaks principal ids: %s", s)
	}
	return res
}

func TestToolFailuresAreClassified(t *testing.T) {
	plain := errors.New("connection reset by peer at 10.0.0.7:5432")
	tools := toolset.MustNew(
		toolset.Read("read_panics", "", func(context.Context, *guard.Invocation, in) (int, error) { panic("boom") }, nil),
		toolset.Write("write_panics", "", func(context.Context, *guard.Invocation, in) (int, error) { panic("boom") }, nil),
		toolset.Read("read_fails", "", func(context.Context, *guard.Invocation, in) (int, error) { return 0, plain }, nil),
		toolset.Write("write_fails", "", func(context.Context, *guard.Invocation, in) (int, error) { return 0, plain }, nil),
		toolset.Write("write_claims_conflict", "", func(context.Context, *guard.Invocation, in) (int, error) {
			return 0, guard.NewError(guard.CodeCallIDConflict, "CLAIMED-TEXT")
		}, nil),

		toolset.Read("read_rate_limited", "", func(context.Context, *guard.Invocation, in) (int, error) {
			return 0, guard.RateLimited(2*time.Second, plain)
		}, nil),

		toolset.Read("authorize_panics", "", func(context.Context, *guard.Invocation, in) (int, error) { return 1, nil },
			&toolset.Options[in, int]{Authorize: func(context.Context, *guard.Invocation, in) error { panic("boom") }}),
		toolset.Read("authorize_fails", "", func(context.Context, *guard.Invocation, in) (int, error) { return 1, nil },
			&toolset.Options[in, int]{Authorize: func(context.Context, *guard.Invocation, in) error { return plain }}),
	)
	g, _ := newGuard(t, tools, guard.Options{})
	want := map[string]guard.Code{
		"read_panics":           guard.CodeUnavailable,
		"write_panics":          guard.CodeOutcomeUnknown,
		"read_fails":            guard.CodeUnavailable,
		"write_fails":           guard.CodeOutcomeUnknown,
		"write_claims_conflict": guard.CodeOutcomeUnknown,
		"read_rate_limited":     guard.CodeRateLimit,
		"authorize_panics":      guard.CodeNotFound,
		"authorize_fails":       guard.CodeNotFound,
	}
	for tool, code := range want {
		res := dispatch(t, g, tool, `{"n":1}`, "call-"+tool)
		if res.Code != code {
			t.Errorf("%s: %s, want %s", tool, res, code)
		}
		if strings.Contains(res.String(), "10.0.0.7") || strings.Contains(res.String(), "boom") || strings.Contains(res.String(), "CLAIMED-TEXT") {
			t.Errorf("%s: result leaks internals: %s", tool, res)
		}
	}
	if r := dispatch(t, g, "read_rate_limited", `{"n":1}`, "c-rl"); r.RetryAfter != 2*time.Second {
		t.Errorf("retry after %v", r.RetryAfter)
	}
}

func TestHostileArguments(t *testing.T) {
	tools := toolset.MustNew(toolset.Read("t", "", func(context.Context, *guard.Invocation, in) (int, error) { return 1, nil }, nil))
	g, _ := newGuard(t, tools, guard.Options{MaxArgumentBytes: 1 << 10, MaxDepth: 8})
	bad := map[string]string{
		"too large":       `{"n":1,"pad":"` + strings.Repeat("x", 2<<10) + `"}`,
		"too deep":        `{"n":1,"x":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`,
		"duplicate key":   `{"n":1,"n":2}`,
		"invalid utf8":    "{\"n\":1,\"s\":\"\xff\"}",
		"overflow int8":   `{"n":300}`,
		"huge number":     `{"n":1e400}`,
		"fraction":        `{"n":1.5}`,
		"not an object":   `[{"n":1}]`,
		"empty":           ``,
		"null":            `null`,
		"trailing":        `{"n":1} {}`,
		"lone surrogate":  `{"n":1,"s":"\ud800"}`,
		"null for member": `{"n":null}`,
	}
	for name, args := range bad {
		if res := dispatch(t, g, "t", args, "c-"+name); res.Code != guard.CodeInvalidArguments {
			t.Errorf("%s: %s, want INVALID_ARGUMENTS", name, res)
		}
	}
	if res := dispatch(t, g, "t", `{"n":-128}`, "c-ok"); res.Code != guard.CodeOK {
		t.Errorf("valid: %s", res)
	}
	if res := dispatch(t, g, "T", `{"n":1}`, "c-case"); res.Code != guard.CodeUnknownTool {
		t.Errorf("tool names are case-sensitive: %s", res)
	}
}

func TestHostErrors(t *testing.T) {
	g, _ := newGuard(t, toolset.MustNew(), guard.Options{})
	for _, p := range []guard.Principal{{}, {TenantID: "t"}, {SubjectID: "s"}, {TenantID: "t", SubjectID: "\xff"}, {TenantID: strings.Repeat("t", 600), SubjectID: "s"}} {
		if _, err := g.Dispatch(context.Background(), guard.Call{Principal: p}); !errors.Is(err, guard.ErrBadPrincipal) {
			t.Errorf("principal %q/%q: %v, want ErrBadPrincipal", p.TenantID, p.SubjectID, err)
		}
		if _, err := g.QueryStatus(context.Background(), guard.StatusCall{Principal: p}); !errors.Is(err, guard.ErrBadPrincipal) {
			t.Errorf("status, principal %q/%q: %v", p.TenantID, p.SubjectID, err)
		}
	}
}

func TestInterceptorsAndChecks(t *testing.T) {
	var order []string
	mark := func(name string) guard.Interceptor {
		return guard.InterceptorFunc(func(next guard.Handler) guard.Handler {
			return func(ctx context.Context, c *guard.Call) (*guard.Result, error) {
				order = append(order, name)
				return next(ctx, c)
			}
		})
	}
	ran := 0
	tools := toolset.MustNew(toolset.Read("t", "", func(context.Context, *guard.Invocation, in) (int, error) { ran++; return 1, nil }, nil))
	g, _ := newGuard(t, tools, guard.Options{
		Interceptors: []guard.Interceptor{mark("outer"), mark("inner")},
		Checks: []guard.Check{func(_ context.Context, inv *guard.Invocation) error {
			switch inv.Input.(in).N {
			case 1:
				return guard.RateLimited(3*time.Second, nil)
			case 2:
				return errors.New("policy says no")
			}
			return nil
		}},
	})
	if r := dispatch(t, g, "t", `{"n":1}`, "c1"); r.Code != guard.CodeRateLimit || r.RetryAfter != 3*time.Second {
		t.Errorf("check rate limit: %s", r)
	}
	if r := dispatch(t, g, "t", `{"n":2}`, "c2"); r.Code != guard.CodeNotFound {
		t.Errorf("check failing closed: %s", r)
	}
	if r := dispatch(t, g, "t", `{"n":3}`, "c3"); r.Code != guard.CodeOK || ran != 1 {
		t.Errorf("passing check: %s, ran %d", r, ran)
	}
	if strings.Join(order[:2], ",") != "outer,inner" {
		t.Errorf("interceptor order %v, want the first listed outermost", order)
	}
}

// statusCounter is an Interceptor of both kinds that counts each.
type statusCounter struct{ dispatches, queries int }

func (c *statusCounter) WrapDispatch(next guard.Handler) guard.Handler {
	return func(ctx context.Context, call *guard.Call) (*guard.Result, error) {
		c.dispatches++
		return next(ctx, call)
	}
}

func (c *statusCounter) WrapStatus(next guard.StatusHandler) guard.StatusHandler {
	return func(ctx context.Context, call *guard.StatusCall) (*guard.Result, error) {
		c.queries++
		return next(ctx, call)
	}
}

// TestOneInterceptorForBothKinds: one Interceptor wraps dispatches and
// status queries; an InterceptorFunc sees dispatches only.
func TestOneInterceptorForBothKinds(t *testing.T) {
	both := &statusCounter{}
	funcSaw := 0
	only := guard.InterceptorFunc(func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, c *guard.Call) (*guard.Result, error) {
			funcSaw++
			return next(ctx, c)
		}
	})
	tools := toolset.MustNew(toolset.Read("t", "", func(context.Context, *guard.Invocation, in) (int, error) { return 1, nil }, nil))
	g, _ := newGuard(t, tools, guard.Options{Interceptors: []guard.Interceptor{only, both}})
	dispatch(t, g, "t", `{"n":3}`, "c1")
	p := guard.Principal{TenantID: "t", SubjectID: "s"}
	if _, err := g.QueryStatus(context.Background(), guard.StatusCall{Principal: p, OperationID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if both.dispatches != 1 || both.queries != 1 || funcSaw != 1 {
		t.Errorf("interceptor saw %d dispatches and %d queries, the func %d dispatches; want 1, 1, 1",
			both.dispatches, both.queries, funcSaw)
	}
}

func TestApprovalWithoutSigner(t *testing.T) {
	w := guardtest.NewDownstream()
	g, _ := newGuard(t, w.Tools(), guard.Options{})
	call := guard.Call{Principal: guard.Principal{TenantID: "t", SubjectID: "s"},
		Proposal: guard.Proposal{Name: "put", Arguments: []byte(`{"key":"a","value":"b"}`)},
		Context:  guard.ExecutionContext{CallID: "c1", IdempotencyKey: "k1"}}
	if r, _ := g.Dispatch(context.Background(), call); r.Code != guard.CodeApprovalRequired {
		t.Errorf("no grant: %s", r)
	}
	call.Context.CallID, call.Approval = "c2", "tg1.forged.token"
	if r, _ := g.Dispatch(context.Background(), call); r.Code != guard.CodeApprovalInvalid {
		t.Errorf("a grant with no signer to check it: %s", r)
	}
	if w.Writes() != 0 {
		t.Errorf("%d writes without approval", w.Writes())
	}
}
