package tgchat_test

import (
	"encoding/json"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgchat "github.com/toolguard/toolguard/adapters/chat"
	"github.com/toolguard/toolguard/adapters/internal/replay"
	"github.com/toolguard/toolguard/provider"
)

// TestRecordedTraffic serves every recorded Chat Completions exchange, of
// OpenAI and of the OpenAI-compatible servers (xAI, Groq, Z.ai), byte for
// byte as they sent it (JSON or SSE, gzip where it was), to the real
// openai-go client through the adapter's Model. It checks each reply's id,
// calls (ids, names, arguments), text, usage and ending against the
// recording, and each follow-up request against the recorded one: the
// same messages after the system prompt (user, assistant, tool ...), the
// assistant message sent back with its text, its calls as they came and
// its reasoning_content where the server streamed one, and one tool
// message per call, answering the recorded ids in order.
func TestRecordedTraffic(t *testing.T) {
	for _, rec := range replay.ForAPI(t, "chat") {
		t.Run(rec.Name, func(t *testing.T) {
			srv := replay.Start(t, rec)
			client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("replay"), option.WithMaxRetries(0))
			m := tgchat.NewModel(client, tgchat.ModelOptions{Name: "recorded"})
			replay.Drive(t, rec, srv, m, replay.Driver{Results: toolContents, Check: checkFollowUp, Usage: recordedUsage})
		})
	}
}

// recordedUsage returns the usage a recorded response reports: the
// completion's, or a stream's last non-null usage.
func recordedUsage(t *testing.T, it replay.Interaction) (in, out int64) {
	payloads, err := it.Payloads()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		var u struct {
			Usage *struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(p, &u) == nil && u.Usage != nil {
			in, out = u.Usage.Prompt, u.Usage.Completion
		}
	}
	return in, out
}

// messages returns a request's messages after the system prompt.
func messages(req map[string]any) []map[string]any {
	list, _ := req["messages"].([]any)
	var out []map[string]any
	for _, it := range list {
		if m, ok := it.(map[string]any); ok && m["role"] != "system" && m["role"] != "developer" {
			out = append(out, m)
		}
	}
	return out
}

// lastTurn returns the last assistant message of a request and the tool
// messages after it.
func lastTurn(req map[string]any) (asst map[string]any, tools []map[string]any) {
	for _, m := range messages(req) {
		switch m["role"] {
		case "assistant":
			asst, tools = m, nil
		case "tool":
			tools = append(tools, m)
		}
	}
	return asst, tools
}

// content returns a message's content: its string, or its text parts
// joined; "" for null or absent.
func content(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok {
				s, _ := pm["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

func toolContents(req map[string]any) []string {
	_, tools := lastTurn(req)
	var out []string
	for _, m := range tools {
		out = append(out, content(m))
	}
	return out
}

// toolCalls returns the id, name and arguments of an assistant message's
// tool calls.
func toolCalls(m map[string]any) [][3]string {
	list, _ := m["tool_calls"].([]any)
	var out [][3]string
	for _, c := range list {
		cm, _ := c.(map[string]any)
		fn, _ := cm["function"].(map[string]any)
		id, _ := cm["id"].(string)
		name, _ := fn["name"].(string)
		args, _ := fn["arguments"].(string)
		out = append(out, [3]string{id, name, args})
	}
	return out
}

func checkFollowUp(t *testing.T, i int, sent, recorded map[string]any, prev *provider.Reply) {
	t.Helper()
	asst, tools := lastTurn(sent)
	if asst == nil {
		t.Fatalf("request %d sends no assistant message", i)
	}
	calls := toolCalls(asst)
	if len(calls) != len(prev.Calls) || len(tools) != len(prev.Calls) {
		t.Fatalf("request %d: the assistant message has %d calls and %d tool messages follow, want %d", i, len(calls), len(tools), len(prev.Calls))
	}
	for j, c := range prev.Calls {
		if calls[j] != [3]string{c.ID, c.Name, c.Arguments} {
			t.Errorf("request %d: call %d sent back as %q, want %q", i, j, calls[j], [3]string{c.ID, c.Name, c.Arguments})
		}
		if tools[j]["tool_call_id"] != c.ID {
			t.Errorf("request %d: tool message %d answers %v, want %s", i, j, tools[j]["tool_call_id"], c.ID)
		}
	}
	if content(asst) != prev.Text {
		t.Errorf("request %d: the assistant message says %q, the reply said %q", i, content(asst), prev.Text)
	}
	if recorded == nil {
		return
	}
	var got, want []string
	for _, m := range messages(sent) {
		got = append(got, m["role"].(string))
	}
	for _, m := range messages(recorded) {
		want = append(want, m["role"].(string))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("request %d: messages %v, recorded %v", i, got, want)
	}
	rasst, rtools := lastTurn(recorded)
	rcalls := toolCalls(rasst)
	if len(rcalls) != len(calls) || len(rtools) != len(tools) {
		t.Fatalf("request %d: %d calls and %d tool messages, recorded %d and %d", i, len(calls), len(tools), len(rcalls), len(rtools))
	}
	for j := range rcalls {
		if calls[j][0] != rcalls[j][0] || calls[j][1] != rcalls[j][1] || !replay.SameJSON(calls[j][2], rcalls[j][2]) {
			t.Errorf("request %d: call %d is %q, recorded %q", i, j, calls[j], rcalls[j])
		}
		if tools[j]["tool_call_id"] != rtools[j]["tool_call_id"] || content(tools[j]) != content(rtools[j]) {
			t.Errorf("request %d: tool message %d is %v %q, recorded %v %q", i, j, tools[j]["tool_call_id"], content(tools[j]), rtools[j]["tool_call_id"], content(rtools[j]))
		}
	}
	if content(asst) != content(rasst) {
		t.Errorf("request %d: the assistant message says %q, recorded %q", i, content(asst), content(rasst))
	}
	if r, ok := rasst["reasoning_content"]; ok && asst["reasoning_content"] != r {
		t.Errorf("request %d: reasoning_content %q, recorded %q", i, asst["reasoning_content"], r)
	}
}
