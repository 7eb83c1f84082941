package toolset_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/toolset"
)

type refundIn struct {
	OrderID string     `json:"order_id" jsonschema:"description=The order to refund"`
	Qty     int8       `json:"qty"`
	Total   int64      `json:"total"`
	Kind    string     `json:"kind" jsonschema:"enum=refund,enum=credit"`
	Price   float64    `json:"price"`
	Note    string     `json:"note,omitempty"`
	Limit   *int       `json:"limit,omitempty"`
	Tags    []string   `json:"tags,omitempty"`
	Ship    *address   `json:"ship,omitempty"`
	Items   []lineItem `json:"items"`
	At      *time.Time `json:"at,omitempty"`
}

type refundOut struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func refundTool(fn toolset.Func[refundIn, refundOut]) *toolset.Tool[refundIn, refundOut] {
	if fn == nil {
		fn = func(context.Context, *guard.Invocation, refundIn) (refundOut, error) { return refundOut{}, nil }
	}
	return toolset.Write("create_refund", "Create a refund.", fn, nil)
}

// decode runs arguments through the same steps as the guard: canon.Parse,
// then Tool.Decode through the guard.Tool interface.
func decode(t *testing.T, tool guard.Tool, args string) (any, error) {
	t.Helper()
	c, v, err := canon.Parse([]byte(args), canon.Limits{})
	if err != nil {
		t.Fatalf("test arguments %s are not valid JSON: %v", args, err)
	}
	return tool.Decode(c, v)
}

const validRefund = `{"order_id":"A-1","qty":2,"total":1500,"kind":"refund","price":7.5,"note":"x","limit":3,
	"tags":["a","b"],"ship":{"street":"Main 1","city":"Springfield","zip":"12345"},
	"items":[{"sku":"S1","qty":1},{"sku":"S2","qty":4}],"at":"2024-05-01T10:00:00Z"}`

func TestDecodeValid(t *testing.T) {
	v, err := decode(t, refundTool(nil), validRefund)
	if err != nil {
		t.Fatal(err)
	}
	in, ok := v.(refundIn)
	if !ok {
		t.Fatalf("Decode returned %T, want refundIn", v)
	}
	three := 3
	at := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	want := refundIn{
		OrderID: "A-1", Qty: 2, Total: 1500, Kind: "refund", Price: 7.5, Note: "x", Limit: &three,
		Tags: []string{"a", "b"}, Ship: &address{Street: "Main 1", City: "Springfield", Zip: "12345"},
		Items: []lineItem{{"S1", 1}, {"S2", 4}}, At: &at,
	}
	if !in.At.Equal(at) {
		t.Errorf("At = %v", in.At)
	}
	in.At, want.At = nil, nil
	if !reflect.DeepEqual(in, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", in, want)
	}
}

func TestDecodeOptionalNull(t *testing.T) {
	args := `{"order_id":"A-1","qty":-128,"total":-9223372036854775808,"kind":"credit","price":-0.0,
		"note":null,"limit":null,"tags":null,"ship":null,"items":[],"at":null}`
	v, err := decode(t, refundTool(nil), args)
	if err != nil {
		t.Fatal(err)
	}
	in := v.(refundIn)
	if in.Note != "" || in.Limit != nil || in.Tags != nil || in.Ship != nil || in.At != nil {
		t.Errorf("null optional fields decoded to %+v", in)
	}
	if in.Qty != math.MinInt8 || in.Total != math.MinInt64 || in.Kind != "credit" || in.Items == nil {
		t.Errorf("decoded %+v", in)
	}
	// Nested optional: null inside a present object.
	v, err = decode(t, refundTool(nil), `{"order_id":"A","qty":0,"total":0,"kind":"refund","price":0,"note":null,
		"limit":null,"tags":null,"ship":{"street":"s","city":"c","zip":null},"items":[],"at":null}`)
	if err != nil {
		t.Fatal(err)
	}
	if s := v.(refundIn).Ship; s == nil || s.Zip != "" || s.City != "c" {
		t.Errorf("ship %+v", s)
	}
}

// A whole-number float decodes into an integer field: canonicalization
// turns 2.0 into 2 and 1e2 into 100 first.
func TestDecodeWholeFloatIntoInt(t *testing.T) {
	args := strings.Replace(validRefund, `"qty":2,`, `"qty":2.0,`, 1)
	args = strings.Replace(args, `"total":1500,`, `"total":15e2,`, 1)
	v, err := decode(t, refundTool(nil), args)
	if err != nil {
		t.Fatal(err)
	}
	if in := v.(refundIn); in.Qty != 2 || in.Total != 1500 {
		t.Errorf("decoded qty %d total %d", in.Qty, in.Total)
	}
}

func TestDecodeInvalid(t *testing.T) {
	base := map[string]any{}
	if err := json.Unmarshal([]byte(validRefund), &base); err != nil {
		t.Fatal(err)
	}
	with := func(key string, val any) string {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		if val == deleteKey {
			delete(m, key)
		} else {
			m[key] = val
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	raw := func(key, val string) string {
		// Replace the member's value with raw JSON text.
		b, _ := json.Marshal(base[key])
		return strings.Replace(with(key, base[key]), `"`+key+`":`+string(b), `"`+key+`":`+val, 1)
	}
	tests := []struct {
		name, args, mention string
	}{
		{"unknown member", with("extra", 1), "extra"},
		{"unknown member differing in case", with("Order_ID", "A-1"), "Order_ID"},
		{"unknown nested member", with("ship", map[string]any{"street": "s", "city": "c", "zip": nil, "x": 1}), "/ship"},
		{"missing required", with("order_id", deleteKey), "order_id"},
		{"missing optional (strict: must be null)", with("note", deleteKey), "note"},
		{"missing nested required", with("ship", map[string]any{"street": "s", "zip": nil}), "city"},
		{"null for required string", with("order_id", nil), "/order_id"},
		{"null for required int", with("qty", nil), "/qty"},
		{"null for required slice", with("items", nil), "/items"},
		{"wrong type string for int", with("qty", "2"), "/qty"},
		{"wrong type number for string", with("order_id", 5), "/order_id"},
		{"wrong type object for array", with("items", map[string]any{}), "/items"},
		{"wrong type bool for number", with("price", true), "/price"},
		{"wrong item type", with("items", []any{"S1"}), "/items/0"},
		{"wrong type in optional", with("limit", "3"), "/limit"},
		{"enum violation", with("kind", "steal"), "/kind"},
		{"enum violation case", with("kind", "Refund"), "/kind"},
		{"fraction for int8", raw("qty", "1.5"), "/qty"},
		{"fraction for int64", raw("total", "0.5"), "/total"},
		{"int8 overflow", raw("qty", "128"), ""},
		{"int8 underflow", raw("qty", "-129"), ""},
		{"int8 overflow 1e30", raw("qty", "1e30"), ""},
		{"int64 overflow", raw("total", "99999999999999999999"), ""},
		{"int64 overflow 1e30", raw("total", "1e30"), ""},
		{"int64 just over", raw("total", "9223372036854775808"), ""},
		{"int in optional overflow", raw("limit", "1e300"), ""},
		{"bad time", with("at", "yesterday"), ""},
	}
	tool := refundTool(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := decode(t, tool, tt.args)
			assertInvalidArguments(t, v, err)
			if tt.mention != "" && !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("message %q does not mention %q", err, tt.mention)
			}
		})
	}
	// Not an object at all.
	for _, args := range []string{`[]`, `[{"order_id":"A-1"}]`, `"{}"`, `42`, `null`, `true`} {
		t.Run("non-object "+args, func(t *testing.T) {
			v, err := decode(t, tool, args)
			assertInvalidArguments(t, v, err)
			if !strings.Contains(err.Error(), "must be a JSON object") {
				t.Errorf("message %q", err)
			}
		})
	}
	// A tree Decode was not meant to see (not from canon.Parse) fails
	// closed too.
	_, err := tool.Decode([]byte(`{}`), map[string]any{"order_id": 1.5})
	assertInvalidArguments(t, nil, err)
}

var deleteKey = &struct{}{}

func assertInvalidArguments(t *testing.T, v any, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, decoded %+v", v)
	}
	if v != nil {
		t.Errorf("value %v returned with error", v)
	}
	code, ok := guard.CodeOf(err)
	if !ok || code != guard.CodeInvalidArguments {
		t.Fatalf("error %v has code %v, want INVALID_ARGUMENTS", err, code)
	}
	var ge *guard.Error
	if !errors.As(err, &ge) {
		t.Fatal("not a *guard.Error")
	}
	msg := ge.Message()
	if msg == "" {
		t.Error("empty message")
	}
	for _, leak := range []string{"toolguard:///", "toolguard:", "input.json", "jsonschema", "#/properties", "refundIn", "toolset"} {
		if strings.Contains(msg, leak) || strings.Contains(err.Error(), leak) {
			t.Errorf("message %q leaks %q", msg, leak)
		}
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("error wraps %v", errors.Unwrap(err))
	}
}

// The validation message is bounded even for many errors and long input.
func TestDecodeMessageBounded(t *testing.T) {
	args := map[string]any{"order_id": strings.Repeat("x", 10_000)}
	for i := range 50 {
		args["extra_"+strings.Repeat("k", i)] = i
	}
	b, _ := json.Marshal(args)
	_, err := decode(t, refundTool(nil), string(b))
	assertInvalidArguments(t, nil, err)
	if n := len(err.(*guard.Error).Message()); n > 2000 {
		t.Errorf("message is %d bytes", n)
	}
}

func TestExecute(t *testing.T) {
	var got refundIn
	var gotInv *guard.Invocation
	tool := refundTool(func(ctx context.Context, inv *guard.Invocation, in refundIn) (refundOut, error) {
		if ctx.Value(ctxKey{}) != "v" {
			t.Error("context not passed through")
		}
		got, gotInv = in, inv
		return refundOut{ID: "R-" + in.OrderID, Amount: in.Total}, nil
	})
	var gt guard.Tool = tool
	in, err := decode(t, gt, validRefund)
	if err != nil {
		t.Fatal(err)
	}
	inv := &guard.Invocation{Input: in, IdempotencyKey: "k1"}
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	out, err := gt.Execute(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) || gotInv != inv {
		t.Errorf("fn got %+v, %p", got, gotInv)
	}
	if string(out) != `{"id":"R-A-1","amount":1500}` {
		t.Errorf("output %s", out)
	}

	// Errors pass through unchanged.
	sentinel := errors.New("downstream said no")
	typed := guard.RateLimited(time.Second, sentinel)
	for _, want := range []error{sentinel, typed, guard.ErrNotFound} {
		failing := refundTool(func(context.Context, *guard.Invocation, refundIn) (refundOut, error) {
			return refundOut{ID: "ignored"}, want
		})
		out, err := failing.Execute(ctx, inv)
		if err != want || out != nil {
			t.Errorf("Execute = %s, %v; want nil, %v", out, err, want)
		}
	}

	// Input of the wrong type: not started, fn not called.
	called := false
	tool2 := refundTool(func(context.Context, *guard.Invocation, refundIn) (refundOut, error) {
		called = true
		return refundOut{}, nil
	})
	for _, bad := range []any{nil, &refundIn{}, map[string]any{}} {
		_, err := tool2.Execute(ctx, &guard.Invocation{Input: bad})
		if code, _ := guard.CodeOf(err); code != guard.CodeTimeoutBeforeExecute {
			t.Errorf("Execute with input %T: %v", bad, err)
		}
	}
	if called {
		t.Error("fn called with wrong input type")
	}
}

type ctxKey struct{}

// An output that cannot be marshalled after the side effect is an unknown
// outcome, not a failure.
func TestExecuteUnmarshalableOutput(t *testing.T) {
	tool := toolset.Write("w", "", func(context.Context, *guard.Invocation, flatIn) (float64, error) {
		return math.Inf(1), nil
	}, nil)

	_, err := tool.Execute(context.Background(), &guard.Invocation{Input: flatIn{}})
	if code, _ := guard.CodeOf(err); code != guard.CodeOutcomeUnknown {
		t.Errorf("Execute = %v, want OUTCOME_UNKNOWN", err)
	}
	tool2 := toolset.Read("r", "", func(context.Context, *guard.Invocation, flatIn) (chan int, error) {
		return make(chan int), nil
	}, nil)

	if _, err := tool2.Execute(context.Background(), &guard.Invocation{Input: flatIn{}}); err == nil {
		t.Error("unmarshalable output accepted")
	}
}

func TestAuthorizeCall(t *testing.T) {
	ctx := context.Background()
	var gt guard.Tool = refundTool(nil)
	if err := gt.AuthorizeCall(ctx, &guard.Invocation{Input: refundIn{}}); err != nil {
		t.Errorf("no hook: %v", err)
	}
	var seen refundIn
	noop := func(context.Context, *guard.Invocation, refundIn) (refundOut, error) { return refundOut{}, nil }
	tool := toolset.Write("create_refund", "Create a refund.", noop, &toolset.Options[refundIn, refundOut]{
		Authorize: func(_ context.Context, inv *guard.Invocation, in refundIn) error {
			seen = in
			if inv.Principal.SubjectID != "alice" || in.OrderID != "mine" {
				return guard.ErrNotFound
			}
			return nil
		},
	})
	gt = tool
	p := guard.Principal{TenantID: "t1", SubjectID: "alice"}
	if err := gt.AuthorizeCall(ctx, &guard.Invocation{Principal: p, Input: refundIn{OrderID: "mine"}}); err != nil {
		t.Errorf("allowed call: %v", err)
	}
	if seen.OrderID != "mine" {
		t.Errorf("hook saw %+v", seen)
	}
	if err := gt.AuthorizeCall(ctx, &guard.Invocation{Principal: p, Input: refundIn{OrderID: "theirs"}}); !errors.Is(err, guard.ErrNotFound) {
		t.Errorf("denied call: %v", err)
	}
	// Wrong input type fails closed as not found, without calling the hook.
	seen = refundIn{}
	if err := gt.AuthorizeCall(ctx, &guard.Invocation{Principal: p, Input: &refundIn{OrderID: "mine"}}); !errors.Is(err, guard.ErrNotFound) {
		t.Errorf("wrong input type: %v", err)
	}
	if seen.OrderID != "" {
		t.Error("hook called with wrong input type")
	}
}

func TestLookupReceipt(t *testing.T) {
	ctx := context.Background()
	inv := &guard.Invocation{IdempotencyKey: "k1"}

	var gt guard.Tool = refundTool(nil)
	// Without a hook nothing can say the operation did not happen: the
	// answer is inconclusive (an error), never "not found".
	out, found, err := gt.LookupReceipt(ctx, inv)
	if out != nil || found || err == nil {
		t.Errorf("no hook: %s, %v, %v; want an inconclusive error", out, found, err)
	}

	lookupErr := errors.New("receipt service down")
	tests := []struct {
		name      string
		out       refundOut
		found     bool
		err       error
		wantOut   string
		wantFound bool
		wantErr   error
	}{
		{"found", refundOut{ID: "R1", Amount: 5}, true, nil, `{"id":"R1","amount":5}`, true, nil},
		{"not found", refundOut{ID: "ignored"}, false, nil, "", false, nil},
		{"error", refundOut{ID: "ignored"}, true, lookupErr, "", false, lookupErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotKey string
			noop := func(context.Context, *guard.Invocation, refundIn) (refundOut, error) { return refundOut{}, nil }
			gt = toolset.Write("create_refund", "Create a refund.", noop, &toolset.Options[refundIn, refundOut]{
				Receipt: func(_ context.Context, inv *guard.Invocation) (refundOut, bool, error) {
					gotKey = inv.IdempotencyKey
					return tt.out, tt.found, tt.err
				},
			})
			out, found, err := gt.LookupReceipt(ctx, inv)
			if string(out) != tt.wantOut || found != tt.wantFound || err != tt.wantErr {
				t.Errorf("LookupReceipt = %s, %v, %v; want %s, %v, %v", out, found, err, tt.wantOut, tt.wantFound, tt.wantErr)
			}
			if gotKey != "k1" {
				t.Errorf("hook saw key %q", gotKey)
			}
		})
	}
	// A found receipt whose output cannot be marshalled is not "found".
	bad := toolset.Write("w", "", func(context.Context, *guard.Invocation, flatIn) (float64, error) { return 0, nil },
		&toolset.Options[flatIn, float64]{Receipt: func(context.Context, *guard.Invocation) (float64, bool, error) { return math.NaN(), true, nil }})
	if out, found, err := bad.LookupReceipt(ctx, inv); found || err == nil || out != nil {
		t.Errorf("unmarshalable receipt: %s, %v, %v", out, found, err)
	}
}

func TestToolAccessors(t *testing.T) {
	fn := func(context.Context, *guard.Invocation, flatIn) (int, error) { return 0, nil }
	tests := []struct {
		name      string
		tool      guard.Tool
		effect    guard.Effect
		approval  bool
		logged    []string
		desc      string
		schemaFor *toolset.Schema
	}{
		{"read", toolset.Read("r", "Reads.", fn, nil), guard.Read, false, nil, "Reads.", nil},
		{"read with NeedsApproval", toolset.Read("r2", "", fn, &toolset.Options[flatIn, int]{NeedsApproval: true}), guard.Read, false, nil, "", nil},
		{"write", toolset.Write("w", "Writes.", fn, nil), guard.Write, false, nil, "Writes.", nil},
		{"write with NeedsApproval", toolset.Write("w2", "", fn, &toolset.Options[flatIn, int]{NeedsApproval: true}), guard.Write, true, nil, "", nil},
		{"logged", toolset.Write("w3", "", fn, &toolset.Options[flatIn, int]{LoggedArguments: []string{"name", "count", "price"}}), guard.Write, false, []string{"name", "count", "price"}, "", nil},
	}
	want, _ := toolset.SchemaFor[flatIn]()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.tool.Spec()
			if spec.Effect != tt.effect {
				t.Errorf("Effect %v", spec.Effect)
			}
			if spec.NeedsApproval != tt.approval {
				t.Errorf("NeedsApproval %v, want %v", spec.NeedsApproval, tt.approval)
			}
			if got := spec.LoggedArguments; !reflect.DeepEqual(got, tt.logged) {
				t.Errorf("LoggedArguments %v, want %v", got, tt.logged)
			}
			d := tt.tool.(toolset.Declared)
			if d.Description() != tt.desc {
				t.Errorf("Description %q", d.Description())
			}
			if d.Schema() != want {
				t.Error("Schema is not SchemaFor's")
			}
		})
	}
}

// Formats are asserted: a date-time the model invents fails validation with
// the validator's reason, before decoding.
func TestDateTimeFormatIsValidated(t *testing.T) {
	type when struct {
		At time.Time `json:"at"`
	}
	tool := toolset.Read("at", "", func(context.Context, *guard.Invocation, when) (string, error) { return "", nil }, nil)
	decode := func(args string) error {
		c, v, err := canon.Parse([]byte(args), canon.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tool.Decode(c, v)
		return err
	}
	if err := decode(`{"at":"2026-11-29T10:00:00Z"}`); err != nil {
		t.Fatalf("valid date-time: %v", err)
	}
	err := decode(`{"at":"yesterday"}`)
	if code, _ := guard.CodeOf(err); code != guard.CodeInvalidArguments || !strings.Contains(err.Error(), "date-time") {
		t.Fatalf("invented date: %v", err)
	}
}
