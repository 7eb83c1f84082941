package tgmcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
)

var user2b = guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}

// serveHTTP serves the world over HTTP on a port of ours, with two tokens:
// "token-a" for tenant-a/user-1 and "token-b" for tenant-b/user-1.
func (w *world) serveHTTP(t *testing.T, port int, limit int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(w.server.Handler(testTokens, &tgmcp.HTTPOptions{MaxRequestBodyBytes: limit}))
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL
}

// rawSession speaks JSON-RPC over streamable HTTP by hand.
type rawSession struct {
	t     *testing.T
	url   string
	token string
	sid   string
}

func (w *world) raw(t *testing.T, url, token string) *rawSession {
	s := &rawSession{t: t, url: url, token: token}
	st, body := s.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if st != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("initialize: %d %s", st, body)
	}
	if st, body := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", st, body)
	}
	return s
}

// post sends one body and returns the status and the JSON-RPC message of
// the answer (the last SSE data line, or the body).
func (s *rawSession) post(body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		s.sid = id
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	last := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = d
		}
	}
	return resp.StatusCode, last
}

// rpcAnswer is a JSON-RPC answer to tools/call: a result with its
// structured content, or an error.
type rpcAnswer struct {
	Result *struct {
		Structured json.RawMessage `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// callRaw sends tools/call with a given JSON-RPC id and params and
// returns the model result, or the JSON-RPC error.
func (s *rawSession) callRaw(id int, params string) (*guard.Result, string) {
	s.t.Helper()
	_, body := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params))
	var msg rpcAnswer
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		s.t.Fatalf("answer %q: %v", body, err)
	}
	if msg.Error != nil {
		return nil, msg.Error.Message
	}
	var res guard.Result
	if err := json.Unmarshal(msg.Result.Structured, &res); err != nil {
		s.t.Fatalf("structuredContent %s: %v", msg.Result.Structured, err)
	}
	return &res, ""
}

func (s *rawSession) getOrder(id int) *guard.Result {
	res, errMsg := s.callRaw(id, `{"name":"get_order","arguments":{"order_ref":"ORDER-7"}}`)
	if res == nil {
		s.t.Fatalf("get_order: %s", errMsg)
	}
	return res
}

// Malformed messages, unknown tools, arguments that are not objects and
// oversized messages each get a clear answer, and the session goes on.
func TestBadInputOverHTTP(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	url := w.serveHTTP(t, 19181, 64<<10)
	s := w.raw(t, url, "token-a")

	for _, body := range []string{`{not json`, `[]`, `{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}`} {
		st, ans := s.post(body)
		if st == http.StatusOK && !strings.Contains(ans, `"error"`) {
			t.Errorf("%s: %d %s, want an error", body, st, ans)
		}
	}
	if res := s.getOrder(10); res.Code != guard.CodeOK {
		t.Fatalf("after malformed messages: %s", res)
	}

	id := 20
	for _, c := range []struct {
		params string
		want   guard.Code
	}{
		{`{"name":"delete_everything","arguments":{}}`, guard.CodeUnknownTool},
		{`{"name":"Get_Order","arguments":{"order_ref":"ORDER-7"}}`, guard.CodeUnknownTool},
		{`{"name":"get_order","arguments":"ORDER-7"}`, guard.CodeInvalidArguments},
		{`{"name":"get_order","arguments":["ORDER-7"]}`, guard.CodeInvalidArguments},
		{`{"name":"get_order","arguments":null}`, guard.CodeInvalidArguments},
		{`{"name":"get_order"}`, guard.CodeInvalidArguments},
		{`{"name":"get_order","arguments":{"order_ref":"ORDER-7","tenant_id":"tenant-b"}}`, guard.CodeInvalidArguments},
		{`{"name":"get_order","arguments":{"order_ref":"` + strings.Repeat("x", 40<<10) + `"}}`, guard.CodeNotFound},
	} {
		id++ // a fresh request each: the same id again would be the same call
		res, errMsg := s.callRaw(id, c.params)
		if res == nil || res.Code != c.want {
			t.Errorf("%.80s: %v %q, want %s", c.params, res, errMsg, c.want)
		}
	}
	// Ids in _meta that are not strings: invalid params.
	if res, errMsg := s.callRaw(21, `{"name":"get_order","arguments":{"order_ref":"ORDER-7"},"_meta":{"toolguard/idempotency_key":7}}`); res != nil || !strings.Contains(errMsg, "must be a string") {
		t.Errorf("numeric key: %v %q", res, errMsg)
	}
	// Over the body limit: 413, and the session goes on.
	if st, _ := s.post(`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"get_order","arguments":{"order_ref":"` + strings.Repeat("x", 70<<10) + `"}}}`); st != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d, want 413", st)
	}
	if res := s.getOrder(31); res.Code != guard.CodeOK {
		t.Fatalf("after an oversized message: %s", res)
	}
	// No token, a wrong token: 401.
	for _, tok := range []string{"", "token-x"} {
		st, _ := (&rawSession{t: t, url: url, token: tok}).post(`{"jsonrpc":"2.0","id":0,"method":"ping"}`)
		if st != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, st)
		}
	}
}

// Arguments over the guard's limit (512 KiB) within the message limit are
// INVALID_ARGUMENTS.
func TestOversizedArguments(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	res, _ := call(t, cs, "get_order", map[string]any{"order_ref": strings.Repeat("x", 600<<10)}, nil)
	if res.Code != guard.CodeInvalidArguments {
		t.Fatalf("got %s", res)
	}
	if res, _ := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-7"}, nil); res.Code != guard.CodeOK {
		t.Fatalf("after: %s", res)
	}
}

// Nothing crosses sessions: another principal's token cannot use a session,
// a status query for another tenant's operation is NOT_FOUND, and the same
// JSON-RPC id in two sessions is two calls, while the same request sent
// twice within its session is one.
func TestSessionsAreApart(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	url := w.serveHTTP(t, 19182, 0)
	a := w.raw(t, url, "token-a")
	b := w.raw(t, url, "token-b")

	hijack := &rawSession{t: t, url: url, token: "token-b", sid: a.sid}
	if st, body := hijack.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_order","arguments":{"order_ref":"ORDER-7"}}}`); st == http.StatusOK && strings.Contains(body, "ORDER-7") {
		t.Fatalf("tenant-b used tenant-a's session: %d %s", st, body)
	}

	// A refund granted in _meta, without ids: the call id is derived from
	// the session and the request id.
	args := `{"order_ref":"ORDER-7","reason":"duplicate"}`
	grant, _ := w.signer.Sign(guard.NewGrant(user1, guard.Proposal{Name: "create_refund_draft", Arguments: []byte(args)}, "approver", time.Now(), time.Minute))
	params := `{"name":"create_refund_draft","arguments":` + args + `,"_meta":{"toolguard/approval":"` + grant + `","toolguard/request":"forged 1"}}`
	first, errMsg := a.callRaw(7, params)
	if first == nil || first.Code != guard.CodeOK || w.svc.SideEffects() != 1 {
		t.Fatalf("refund: %v %q, %d drafts", first, errMsg, w.svc.SideEffects())
	}
	again, _ := a.callRaw(7, params)
	if again.Code != guard.CodeOK || again.Delivery != guard.DeliveryLocalReplay || w.svc.SideEffects() != 1 {
		t.Fatalf("same request again in its session: %s, %d drafts", again, w.svc.SideEffects())
	}
	// Another session is another operation, which the spent grant does
	// not pay for: it needs a grant of its own.
	a2 := w.raw(t, url, "token-a")
	other, _ := a2.callRaw(7, params)
	if other.Code != guard.CodeApprovalInvalid || other.Message != guard.GrantUsedMessage || w.svc.SideEffects() != 1 {
		t.Fatalf("same request id and grant in another session: %s, %d drafts", other, w.svc.SideEffects())
	}
	grant2, _ := w.signer.Sign(guard.NewGrant(user1, guard.Proposal{Name: "create_refund_draft", Arguments: []byte(args)}, "approver", time.Now(), time.Minute))
	other, _ = a2.callRaw(7, strings.Replace(params, grant, grant2, 1))
	if other.Code != guard.CodeOK || other.Delivery != guard.DeliveryFresh || w.svc.SideEffects() != 2 {
		t.Fatalf("same request id in another session: %s, %d drafts", other, w.svc.SideEffects())
	}

	// tenant-a's order and operations do not exist for tenant-b.
	if res := b.getOrder(1); res.Code != guard.CodeNotFound {
		t.Fatalf("tenant-b reads ORDER-7: %s", res)
	}
	ops, _ := a.callRaw(8, `{"name":"get_order","arguments":{"order_ref":"ORDER-7"},"_meta":{"toolguard/call_id":"op-a-1"}}`)
	if ops.Code != guard.CodeOK {
		t.Fatal(ops)
	}
	for _, s := range []*rawSession{a, b} {
		res, _ := s.callRaw(9, `{"name":"query_operation_status","arguments":{"operation_id":"op-a-1","tool":null}}`)
		want := guard.CodeOK
		if s == b {
			want = guard.CodeNotFound
		}
		if res.Code != want {
			t.Errorf("status of op-a-1 from %s: %s, want %s", s.token, res, want)
		}
	}
}

// A write whose client sent identity members that are all empty does not
// run: an invalid-params error, and nothing happens.
func TestWriteWithoutIdentity(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	cs := w.connect(t, nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "create_refund_draft",
		Arguments: map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"},
		Meta:      sdk.Meta{tgmcp.MetaCallID: "", tgmcp.MetaIdempotencyKey: ""}})
	if err == nil || !strings.Contains(err.Error(), "a write needs an identity") || w.svc.SideEffects() != 0 {
		t.Fatalf("got %v, %d drafts", err, w.svc.SideEffects())
	}
	if res, _ := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-7"}, nil); res.Code != guard.CodeOK {
		t.Fatalf("after: %s", res)
	}
}
