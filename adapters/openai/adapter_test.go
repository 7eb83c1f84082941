package tgopenai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/provider"
)

func newGuard(t testing.TB) *guard.Guard {
	_, rdb := redistest.Mini(t)
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return guard.New(orders.Tools(orders.NewService()), s, guard.Options{})
}

// A full round trip through the real openai-go client and a fake Responses
// server: calls in, guard, function_call_output items back.
func TestRoundTrip(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`, CallID: "call_1"},
			{Name: "get_order", Arguments: `{"order_ref":`, CallID: "call_2"},
			{Name: "delete_everything", Arguments: `{}`, CallID: "call_3"},
		}},
		fakemodel.Turn{Text: "Order 7 is paid."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))
	set := orders.Tools(orders.NewService())
	ctx := context.Background()
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("what about ORDER-7?")},
		Tools: tgopenai.Tools(set),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(t)
	p := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	var items []responses.ResponseInputItemUnionParam
	calls := tgopenai.Calls(resp, set.Tools())
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	wantCodes := []guard.Code{guard.CodeOK, guard.CodeInvalidArguments, guard.CodeUnknownTool}
	for i, c := range calls {
		call := tgopenai.Call(p, "", resp.ID, c)
		if call.Context.Provider != "openai" || call.Context.APIFamily != "responses" ||
			call.Context.AdapterRevision != "openai-responses-v1" || call.Context.ResponseID != resp.ID || call.Context.CallID != c.ID {
			t.Fatalf("context %+v", call.Context)
		}
		res, err := g.Dispatch(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != wantCodes[i] {
			t.Errorf("call %d: %s, want %s", i, res, wantCodes[i])
		}
		items = append(items, tgopenai.Output(c, res))
	}
	final, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "gpt-test",
		PreviousResponseID: oai.String(resp.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: items},
	})
	if err != nil {
		t.Fatal(err)
	}
	if final.OutputText() != "Order 7 is paid." {
		t.Errorf("final text %q", final.OutputText())
	}
	reqs := srv.Requests()
	outs := reqs[len(reqs)-1].Results()
	if len(outs) != 3 {
		t.Fatalf("%d outputs on the wire, want 3", len(outs))
	}
	for i, o := range outs {
		var r guard.Result
		if err := json.Unmarshal([]byte(o.Output), &r); err != nil {
			t.Fatalf("output %d is not a model result: %v: %s", i, err, o.Output)
		}
		if o.CallID != calls[i].ID || r.Code != wantCodes[i] {
			t.Errorf("output %d: call %s code %s", i, o.CallID, r.Code)
		}
	}
	// The definitions on the wire are strict and carry the toolset's schema.
	tools := reqs[0].Tools
	if len(tools) != 2 || tools[0].Name != "get_order" || tools[0].Strict == nil || !*tools[0].Strict {
		t.Fatalf("tools on the wire: %+v", tools)
	}
	var onWire, declared any
	_ = json.Unmarshal(tools[1].Parameters, &onWire)
	_ = json.Unmarshal(set.Tools()[1].Schema().JSON(), &declared)
	a, _ := json.Marshal(onWire)
	b, _ := json.Marshal(declared)
	if string(a) != string(b) {
		t.Errorf("schema on the wire %s\ndiffers from the validated one %s", a, b)
	}
}

func TestOutputText(t *testing.T) {
	item := tgopenai.Output(provider.ToolCall{ID: "call_9"}, &guard.Result{Code: guard.CodeNotFound})
	id, out, ok := tgopenai.OutputText(item)
	if !ok || id != "call_9" {
		t.Fatalf("OutputText = %q, %q, %v", id, out, ok)
	}
	raw, err := json.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Type, CallID, Output string
	}
	if err := json.Unmarshal(raw, &struct {
		Type   *string `json:"type"`
		CallID *string `json:"call_id"`
		Output *string `json:"output"`
	}{&wire.Type, &wire.CallID, &wire.Output}); err != nil {
		t.Fatal(err)
	}
	if wire.Type != "function_call_output" || wire.CallID != "call_9" || wire.Output != out {
		t.Fatalf("wire item %s", raw)
	}
	if _, _, ok := tgopenai.OutputText(responses.ResponseInputItemUnionParam{}); ok {
		t.Error("OutputText accepted an item that is not a function_call_output")
	}
}

// FuzzArguments sends arbitrary argument strings through the adapter and the
// guard: every one gets a valid model result, none panics.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"order_ref":"ORDER-7"}`, `{"order_ref":`, ``, `null`, `[]`, `{"order_ref":"ORDER-7","order_ref":"ORDER-8"}`,
		"{\"order_ref\":\"\xff\"}", `{"order_ref":1e999}`, `{"a":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}`, `{"order_ref":"\ud800"}`} {
		f.Add("get_order", s)
		f.Add("create_refund_draft", s)
	}
	g := newGuard(f)
	p := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	n := 0
	f.Fuzz(func(t *testing.T, name, args string) {
		n++
		c := provider.ToolCall{Name: name, Arguments: args, ID: "call_" + string(rune('a'+n%26)) + name + args}
		res, err := g.Dispatch(context.Background(), tgopenai.Call(p, "", "resp_1", c))
		if err != nil {
			t.Fatalf("host error for a model input: %v", err)
		}
		_, out, ok := tgopenai.OutputText(tgopenai.Output(c, res))
		var back guard.Result
		if !ok || json.Unmarshal([]byte(out), &back) != nil || back.Code != res.Code {
			t.Fatalf("output %q is not a valid model result", out)
		}
	})
}

// Bad input at the edges, at the default limits, through the adapter.
func TestHostileArgumentsAtDefaultLimits(t *testing.T) {
	g := newGuard(t)
	p := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	huge := `{"order_ref":"` + strings.Repeat("x", 1<<20) + `"}`
	deep := strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200)
	cases := map[string]string{
		"1 MiB":            huge,
		"200 levels deep":  deep,
		"invalid UTF-8":    "{\"order_ref\":\"ORDER-7\xc3\x28\"}",
		"duplicate keys":   `{"order_ref":"ORDER-7","order_ref":"ORDER-8"}`,
		"number overflow":  `{"order_ref":1e999}`,
		"empty":            ``,
		"truncated":        `{"order_ref":"ORDER-7"`,
		"array":            `["ORDER-7"]`,
		"NUL in string":    "{\"order_ref\":\"ORDER\x00-7\"}",
		"escaped NUL":      `{"order_ref":"ORDER\u0000-7"}`,
		"BOM":              "\ufeff{\"order_ref\":\"ORDER-7\"}",
		"single quotes":    `{'order_ref':'ORDER-7'}`,
		"trailing comma":   `{"order_ref":"ORDER-7",}`,
		"NaN":              `{"order_ref":NaN}`,
		"comment":          `{"order_ref":"ORDER-7"/*x*/}`,
		"lone surrogate":   `{"order_ref":"\udc00"}`,
		"extra top-levels": `{"order_ref":"ORDER-7"}{"order_ref":"ORDER-8"}`,
	}
	for name, args := range cases {
		res, err := g.Dispatch(context.Background(), tgopenai.Call(p, "", "resp_1",
			provider.ToolCall{Name: "get_order", Arguments: args, ID: "call-" + name}))
		if err != nil {
			t.Fatalf("%s: host error %v", name, err)
		}
		want := guard.CodeInvalidArguments
		if name == "escaped NUL" {
			want = guard.CodeNotFound // valid JSON; no such order
		}
		if res.Code != want {
			t.Errorf("%s: %s, want %s", name, res, want)
		}
		if len(res.String()) > 2048 {
			t.Errorf("%s: the result echoes the input (%d bytes)", name, len(res.String()))
		}
	}
}
