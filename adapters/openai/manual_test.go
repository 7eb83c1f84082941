package tgopenai_test

import (
	"context"
	"encoding/json"
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
)

// The hand-written loop the package doc shows keeps contract section 3's
// rules for calls that are not complete function calls: a function call
// the provider marked in_progress or incomplete does not run, a custom
// tool call is answered UNKNOWN_TOOL with a custom_tool_call_output item,
// and every call of the response gets exactly one answer on the wire.
func TestDocumentedLoopKeepsSection8(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`, CallID: "call_done"},
			{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`, CallID: "call_running", Status: "in_progress"},
			{Name: "get_order", Arguments: `{"order_ref":"ORD`, CallID: "call_cut", Status: "incomplete"},
			{Name: "shell", Arguments: "rm -rf /", CallID: "call_custom", Custom: true},
		}},
		fakemodel.Turn{Text: "done"},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))
	svc := orders.NewService()
	set := orders.Tools(svc)
	_, rdb := redistest.Mini(t)
	store, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := guard.New(set, store, guard.Options{})
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	ctx := context.Background()

	params := responses.ResponseNewParams{Model: "gpt-test", Tools: tgopenai.Tools(set),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("ORDER-7?")}}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	// The loop of doc.go, as written there.
	var outputs responses.ResponseInputParam
	for _, c := range tgopenai.Calls(resp, set.Tools()) {
		res := c.Answer
		if res == nil {
			res, err = g.Dispatch(ctx, tgopenai.Call(principal, "conversation-1", resp.ID, c))
			if err != nil {
				t.Fatal(err)
			}
		}
		outputs = append(outputs, tgopenai.Output(c, res))
	}
	params.PreviousResponseID = oai.String(resp.ID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	if _, err := client.Responses.New(ctx, params); err != nil {
		t.Fatal(err)
	}

	if n := svc.Calls(); n != 1 {
		t.Errorf("the service ran %d times; want 1 (only the completed call)", n)
	}
	want := map[string]struct {
		typ  string
		code guard.Code
	}{
		"call_done":    {"function_call_output", guard.CodeOK},
		"call_running": {"function_call_output", guard.CodeInvalidArguments},
		"call_cut":     {"function_call_output", guard.CodeInvalidArguments},
		"call_custom":  {"custom_tool_call_output", guard.CodeUnknownTool},
	}
	reqs := srv.Requests()
	got := map[string]bool{}
	for _, it := range reqs[len(reqs)-1].Input {
		var item struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		}
		if err := json.Unmarshal(it.Raw, &item); err != nil {
			t.Fatal(err)
		}
		w, ok := want[item.CallID]
		if !ok {
			t.Errorf("unexpected item %s", it.Raw)
			continue
		}
		if got[item.CallID] {
			t.Errorf("%s answered twice", item.CallID)
		}
		got[item.CallID] = true
		var r guard.Result
		if err := json.Unmarshal([]byte(item.Output), &r); err != nil {
			t.Fatalf("%s: output is not a model result: %v: %s", item.CallID, err, item.Output)
		}
		if item.Type != w.typ || r.Code != w.code {
			t.Errorf("%s: %s %s, want %s %s", item.CallID, item.Type, r.Code, w.typ, w.code)
		}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s was never answered", id)
		}
	}
}
