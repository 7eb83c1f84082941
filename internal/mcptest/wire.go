package mcptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TasksExtension names the Tasks extension (SEP-2663).
const TasksExtension = "io.modelcontextprotocol/tasks"

// TasksCaps are the per-request capabilities of a client that answers
// elicitations and declares the Tasks extension.
func TasksCaps() map[string]any {
	return map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "extensions": map[string]any{TasksExtension: map[string]any{}}}
}

// Wire is a client of protocol 2026-07-28 that writes its messages as the
// specification does (SEP-2575's per-request _meta and headers), for what
// go-sdk's client cannot send or read: the Tasks extension's methods, a
// tools/call answered with a task, a tools/call with idempotencyKey.
type Wire struct {
	TB    testing.TB
	URL   string
	Token string
	// Caps are the client capabilities sent with every request.
	Caps map[string]any
	mu   sync.Mutex
	id   int
}

// Error is a JSON-RPC error as it came.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Call sends one request and returns its result, or its error. A request
// that gets no JSON-RPC answer fails the test.
func (c *Wire) Call(method string, params map[string]any) (map[string]any, *Error) {
	c.TB.Helper()
	c.mu.Lock()
	c.id++
	id := c.id
	c.mu.Unlock()
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	caps := c.Caps
	if caps == nil {
		caps = map[string]any{}
	}
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "wire", "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	req, _ := http.NewRequest(http.MethodPost, c.URL, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := p["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	} else if id, ok := p["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.TB.Fatal(err)
	}
	defer resp.Body.Close()
	var last string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		} else if strings.HasPrefix(line, "{") {
			last = line
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *Error         `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &msg); err != nil {
		c.TB.Fatalf("%s: HTTP %d, answer %q: %v", method, resp.StatusCode, last, err)
	}
	return msg.Result, msg.Error
}

// Must is Call for a request that must succeed.
func (c *Wire) Must(method string, params map[string]any) map[string]any {
	c.TB.Helper()
	res, rerr := c.Call(method, params)
	if rerr != nil {
		c.TB.Fatalf("%s: error %d %s %s", method, rerr.Code, rerr.Message, rerr.Data)
	}
	return res
}

// Get polls a task (tasks/get).
func (c *Wire) Get(id string) map[string]any {
	c.TB.Helper()
	return c.Must("tasks/get", map[string]any{"taskId": id})
}

// Answer sends the human's answer to a task's approval question
// (tasks/update) and checks the acknowledgement.
func (c *Wire) Answer(id string, approve bool) {
	c.TB.Helper()
	resp := map[string]any{"action": "decline"}
	if approve {
		resp = map[string]any{"action": "accept", "content": map[string]any{"approve": true}}
	}
	ack := c.Must("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"toolguard_approval": resp}})
	if ack["resultType"] != "complete" {
		c.TB.Fatalf("tasks/update: %v, want the empty result", ack)
	}
}

// CreateTask calls a tool and returns the task it is answered with (a
// CreateTaskResult waiting for input), checking its members.
func (c *Wire) CreateTask(tool string, args map[string]any) map[string]any {
	c.TB.Helper()
	res := c.Must("tools/call", map[string]any{"name": tool, "arguments": args})
	if res["resultType"] != "task" || res["status"] != "input_required" {
		c.TB.Fatalf("tools/call: %v, want a task waiting for input", res)
	}
	for _, k := range []string{"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if res[k] == nil {
			c.TB.Fatalf("CreateTaskResult without %s: %v", k, res)
		}
	}
	return res
}

// TaskResult returns the structured content of a completed task's result
// (the model result, for a toolguard server), checking that its isError
// is set exactly when its code is not OK.
func TaskResult(tb testing.TB, task map[string]any) json.RawMessage {
	tb.Helper()
	if task["status"] != "completed" || task["resultType"] != "complete" {
		tb.Fatalf("task %v, want completed", task)
	}
	r, _ := task["result"].(map[string]any)
	b, _ := json.Marshal(r["structuredContent"])
	var res struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Code == "" {
		tb.Fatalf("task result %v: %v", r, err)
	}
	if isErr, _ := r["isError"].(bool); isErr != (res.Code != "OK") {
		tb.Fatalf("task result isError %v for %s", r["isError"], res.Code)
	}
	return b
}

// DataType returns data.type of the JSON-RPC error that err wraps (as
// go-sdk's client returns it), or "".
func DataType(err error) string {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return ""
	}
	var data struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(werr.Data, &data)
	return data.Type
}

// Post sends one 2026-07-28 request whose params are the raw JSON given,
// with the _meta of c's capabilities put in when params is an object, and
// returns the HTTP status and the last JSON-RPC message of the answer (or
// the body). Unlike Call, anything may come back.
func (c *Wire) Post(method, params string) (int, string) {
	c.TB.Helper()
	var p map[string]json.RawMessage
	if json.Unmarshal([]byte(params), &p) == nil && p != nil {
		meta, _ := json.Marshal(map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": c.Caps,
		})
		p["_meta"] = meta
		b, _ := json.Marshal(p)
		params = string(b)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":` + strconvQuote(method) + `,"params":` + params + `}`
	req, _ := http.NewRequest(http.MethodPost, c.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	var named struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal([]byte(params), &named)
	if n := named.Name + named.TaskID; n != "" && !strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		req.Header.Set("Mcp-Name", n) // a name HTTP cannot carry is left out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.TB.Fatal(err)
	}
	defer resp.Body.Close()
	var last, all strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line)
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last.Reset()
			last.WriteString(d)
		}
	}
	if last.Len() == 0 {
		return resp.StatusCode, all.String()
	}
	return resp.StatusCode, last.String()
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
