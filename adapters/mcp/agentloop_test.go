package tgmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
)

// Tools imported from a third-party MCP server run in an agentloop like any
// others: a read once, and an approved write once although the model asks
// for it again.
func TestAgentloopRunsRemoteTools(t *testing.T) {
	tp := &thirdParty{}
	rt := importTools(t, connectTo(t, tp.server()), tgmcp.ImportOptions{})
	set, err := rt.Set()
	if err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "call_read", Name: "lookup", Arguments: `{"text":"x"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "call_w1", Name: "add_note", Arguments: `{"text":"hi"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "call_w2", Name: "add_note", Arguments: `{ "text": "hi" }`}}},
		fakemodel.Turn{Text: "Found x and noted hi."},
	)
	t.Cleanup(srv.Close)
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"))
	var asked atomic.Int32
	approver := host.ApproverFunc(func(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
		asked.Add(1)
		if req.Tool != "add_note" || string(req.Arguments) != `{"text":"hi"}` {
			t.Errorf("approval asked for %s %s", req.Tool, req.Arguments)
		}
		return host.Decision{Approved: true, Approver: "ann"}, nil
	})
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), set, agentloop.Options{Approver: approver})
	if err := loop.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := loop.Run(ctx, user1, "Look up x, then note hi.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "Found x and noted hi." || srv.Remaining() != 0 {
		t.Fatalf("status %q, output %q, %d turns left", res.Status, res.Output, srv.Remaining())
	}
	if tp.lookupCount() != 1 || tp.count() != 1 {
		t.Errorf("the remote server saw %d lookups and %d notes, want 1 and 1", tp.lookupCount(), tp.count())
	}
	if n := asked.Load(); n != 1 { // the repeat is the same intent: replayed, not asked again
		t.Errorf("the approver was asked %d times, want 1", n)
	}

	// The transcript has the guard's results: the remote read's data, the
	// write fresh once and then replayed.
	results := map[string]guard.Result{}
	for _, e := range res.Transcript {
		if e.Kind == agentloop.EventResult {
			var r guard.Result
			if err := json.Unmarshal(e.Result, &r); err != nil {
				t.Fatalf("result of %s: %v: %s", e.CallID, err, e.Result)
			}
			results[e.CallID] = r
		}
	}
	if r := results["call_read"]; r.Code != guard.CodeOK || string(r.Data) != `{"found":"x"}` {
		t.Errorf("read result %+v", r)
	}
	if r := results["call_w1"]; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryFresh || string(r.Data) != `{"notes":1}` {
		t.Errorf("first write result %+v", r)
	}
	if r := results["call_w2"]; r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay || string(r.Data) != `{"notes":1}` {
		t.Errorf("repeated write result %+v", r)
	}
	if !strings.Contains(res.Transcript.String(), "guard:     lookup OK") {
		t.Errorf("transcript:\n%s", res.Transcript)
	}

	// The model was offered the remote tools with the server's own
	// schemas, not in strict mode.
	tools := srv.Requests()[0].Tools
	for _, rtool := range rt.Tools() {
		var found bool
		for _, w := range tools {
			if w.Name == rtool.Name() {
				found = true
				if w.Strict == nil || *w.Strict || !sameJSON(t, w.Parameters, rtool.InputSchema()) {
					t.Errorf("tool %s on the wire: %s", w.Name, w.Raw)
				}
			}
		}
		if !found {
			t.Errorf("tool %s not offered: %v", rtool.Name(), srv.Requests()[0].ToolNames())
		}
	}
}

// A remote tool name that model providers refuse is reported by Set,
// naming the tool; the tools still work with guard.New.
func TestRemoteToolsSetRefusesNames(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "dotted", Version: "v1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "notes.list", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return nil, map[string]any{}, nil
		})
	rt := importTools(t, connectTo(t, s), tgmcp.ImportOptions{})
	if rt.Lookup("notes.list") == nil {
		t.Fatal("notes.list not imported")
	}
	set, err := rt.Set()
	if err == nil || !strings.Contains(err.Error(), `"notes.list"`) {
		t.Fatalf("Set = %v, %v; want an error naming notes.list", set, err)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
