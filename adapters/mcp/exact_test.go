package tgmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
)

// An integer above 2^53 in a remote tool's structured content reaches the
// model exactly: go-sdk's client decodes structuredContent into float64,
// so the client reads the exact JSON from the text content that carries
// the same value beside it. The remote here writes its result as a server
// in another language does, exact on the wire (go-sdk's own typed
// handlers round such an integer before it leaves the server).
func TestRemoteIntegersStayExact(t *testing.T) {
	const wire = `{"id":9007199254740993,"price":0.1}`
	s := sdk.NewServer(&sdk.Implementation{Name: "ids", Version: "v1"}, nil)
	s.AddTool(&sdk.Tool{Name: "next_id", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: json.RawMessage(wire),
				Content: []sdk.Content{&sdk.TextContent{Text: wire}}}, nil
		})
	g, _ := importInto(t, connectTo(t, s), tgmcp.ImportOptions{})
	res := dispatch(t, g, remoteCall(user1, "next_id", `{}`, ""))
	if res.Code != guard.CodeOK {
		t.Fatalf("next_id: %s", res)
	}
	if want := `"id":9007199254740993`; !strings.Contains(string(res.Data), want) {
		t.Errorf("data %s, want %s", res.Data, want)
	}
}

// The same for a remote toolguard server's model result, and a text that
// does not carry the structured content is not taken for it.
func TestModelResultExact(t *testing.T) {
	for _, c := range []struct {
		name, wire, want string
	}{
		{"text beside", `{"content":[{"type":"text","text":"{\"contract\":\"tool-model-result-v2\",\"code\":\"OK\",\"status\":\"succeeded\",\"outcome\":\"committed\",\"recovery\":\"none\",\"delivery\":\"fresh\",\"data\":{\"id\":9007199254740993}}"}],` +
			`"structuredContent":{"contract":"tool-model-result-v2","code":"OK","status":"succeeded","outcome":"committed","recovery":"none","delivery":"fresh","data":{"id":9007199254740993}}}`,
			`{"id":9007199254740993}`},
		{"another text", `{"content":[{"type":"text","text":"{\"data\":{\"id\":1}}"}],` +
			`"structuredContent":{"contract":"tool-model-result-v2","code":"OK","status":"succeeded","outcome":"committed","recovery":"none","delivery":"fresh","data":{"id":7}}}`,
			`{"id":7}`},
	} {
		var r sdk.CallToolResult
		if err := json.Unmarshal([]byte(c.wire), &r); err != nil {
			t.Fatal(err)
		}
		mr, err := tgmcp.ModelResult(&r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(mr.Data) != c.want {
			t.Errorf("%s: data %s, want %s", c.name, mr.Data, c.want)
		}
	}
}
