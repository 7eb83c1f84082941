package tgmcp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
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
