package tgmcp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/mcptest"
)

// FuzzToolsCall sends arbitrary tools/call params over streamable HTTP, as
// a client no one checked would: each is answered with a JSON-RPC error,
// a 4xx, or a tool result whose structured content is a model result; no
// panic reaches the host, and the session then still answers a read.
func FuzzToolsCall(f *testing.F) {
	for _, p := range []string{
		`{"name":"get_order","arguments":{"order_ref":"ORDER-7"}}`,
		`{"name":"create_refund_draft","arguments":{"order_ref":"ORDER-7","reason":"duplicate"},"_meta":{"toolguard/idempotency_key":"k1"}}`,
		`{"name":"toolguard_operation_status","arguments":{"operation_id":"op-1"}}`,
		`{"name":"get_order","arguments":{"order_ref":"ORDER-7"},"_meta":{"toolguard/idempotency_key":7}}`,
		`{"name":"get_order","arguments":"ORDER-7"}`, `{"name":"get_order"}`, `{"name":7}`, `[]`, `null`, `"x"`,
		`{"name":"get_order","arguments":{"order_ref":"ORDER-7","order_ref":"ORDER-8"}}`,
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, params string) {
		w := newWorld(t, tgmcp.Options{})
		s := w.raw(t, w.serveHTTP(t, 0, 64<<10), "token-a")
		st, body := s.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`)
		if st == http.StatusOK {
			var msg rpcAnswer
			if err := json.Unmarshal([]byte(body), &msg); err != nil || (msg.Result == nil) == (msg.Error == nil) {
				t.Fatalf("answer %q: want a result or an error (%v)", body, err)
			}
			if msg.Result != nil {
				var res guard.Result
				if err := json.Unmarshal(msg.Result.Structured, &res); err != nil {
					t.Fatalf("structured content %s is not a model result: %v", msg.Result.Structured, err)
				}
			}
		} else if st < 400 || st >= 500 {
			t.Fatalf("HTTP %d %q: want 200 or a client error", st, body)
		}
		if res := s.getOrder(2); res.Code != guard.CodeOK {
			t.Fatalf("after %q the session answers a read %s", params, res)
		}
	})
}

// FuzzStateless sends arbitrary members of the requests a 2026-07-28
// client makes of a fleet (tools/call with requestState, inputResponses and
// idempotencyKey; tasks/get, tasks/update and tasks/cancel with a task id
// and responses) to two replicas: each is answered with a JSON-RPC error, a
// 4xx, a task, a question, or a tool result whose structured content is a
// model result; no panic reaches the host, a refund runs only with an
// answer the server can read as a yes, and a read then still works.
func FuzzStateless(f *testing.F) {
	f.Add(uint8(0), `"tgq1.AAAA"`, `{"toolguard_approval":{"action":"accept","content":{"approve":true}}}`, `"k1"`, `{"order_ref":"ORDER-7","reason":"duplicate"}`)
	f.Add(uint8(0), `""`, `{"toolguard_approval":{"action":"accept"}}`, `7`, `{}`)
	f.Add(uint8(0), `null`, `[]`, `""`, `null`)
	f.Add(uint8(0), `"tgq1."`, `{"toolguard_approval":{"roots":[]}}`, `{"a":1}`, `"ORDER-7"`)
	f.Add(uint8(1), `"task_00"`, `{"toolguard_approval":{"action":"accept","content":{"approve":true}}}`, `null`, `{}`)
	f.Add(uint8(2), `7`, `{"x":{"role":"user"}}`, `null`, `{}`)
	f.Add(uint8(3), `{"taskId":1}`, `null`, `null`, `{}`)
	fl := newFleet(f, mini(f), tgmcp.Options{}) // one fleet for the run: a fleet takes any request
	f.Fuzz(func(t *testing.T, method uint8, state, responses, key, args string) {
		w := &mcptest.Wire{TB: t, URL: fl.url, Token: "token-a", Caps: mcptest.TasksCaps()}
		raw := func(s string) json.RawMessage {
			if json.Valid([]byte(s)) {
				return json.RawMessage(s)
			}
			b, _ := json.Marshal(s)
			return b
		}
		var name string
		var p map[string]json.RawMessage
		switch method % 4 {
		case 0:
			name = "tools/call"
			p = map[string]json.RawMessage{"name": raw(`"create_refund_draft"`), "arguments": raw(args),
				"requestState": raw(state), "inputResponses": raw(responses), "idempotencyKey": raw(key)}
		case 1:
			name = "tasks/update"
			p = map[string]json.RawMessage{"taskId": raw(state), "inputResponses": raw(responses)}
		case 2:
			name = "tasks/get"
			p = map[string]json.RawMessage{"taskId": raw(state)}
		default:
			name = "tasks/cancel"
			p = map[string]json.RawMessage{"taskId": raw(state)}
		}
		params, _ := json.Marshal(p)
		st, body := w.Post(name, string(params))
		if st == http.StatusOK {
			var msg struct {
				Result map[string]json.RawMessage `json:"result"`
				Error  json.RawMessage            `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &msg); err != nil || (msg.Result == nil) == (msg.Error == nil) {
				t.Fatalf("answer %q: want a result or an error (%v)", body, err)
			}
			if sc := msg.Result["structuredContent"]; sc != nil {
				var res guard.Result
				if err := json.Unmarshal(sc, &res); err != nil {
					t.Fatalf("structured content %s is not a model result: %v", sc, err)
				}
			}
		} else if st < 400 || st >= 500 {
			t.Fatalf("HTTP %d %q: want 200 or a client error", st, body)
		}
		if n := fl.runs.Load(); n != 0 {
			t.Fatalf("%s %s ran a refund nobody approved", name, params)
		}
		if res := w.Must("tools/call", map[string]any{"name": "get_order", "arguments": map[string]any{"order_ref": "ORDER-7"}}); res["isError"] == true {
			t.Fatalf("after %s %s a read fails: %v", name, params, res)
		}
	})
}
