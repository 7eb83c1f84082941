package tgmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/mcptest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// yes and no are a human's answers to the approval question, as a client
// driving the multi round-trip by hand sends them back.
var (
	yes = sdk.InputResponseMap{"toolguard_approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	no  = sdk.InputResponseMap{"toolguard_approval": &sdk.ElicitResult{Action: "decline"}}
)

// question calls a write that needs approval and returns the request state
// of the question it is answered with.
func question(t *testing.T, cs *sdk.ClientSession, name string, args any, meta sdk.Meta) string {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !r.NeedsInput() || r.RequestState == "" || r.InputRequests["toolguard_approval"] == nil {
		t.Fatalf("%s: want a question, got %+v", name, r)
	}
	return r.RequestState
}

// answerCall sends the call again with the answer and the request state;
// it returns the model result, or the JSON-RPC error's data.type and the
// error.
func answerCall(t *testing.T, cs *sdk.ClientSession, name string, args any, meta sdk.Meta, ans sdk.InputResponseMap, state string) (*guard.Result, string, error) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta, InputResponses: ans, RequestState: state})
	if err != nil {
		return nil, mcptest.DataType(err), err
	}
	if r.NeedsInput() {
		t.Fatalf("%s: answered with a new question %+v", name, r)
	}
	res, err := tgmcp.ModelResult(r)
	if err != nil {
		t.Fatal(err)
	}
	return res, "", nil
}

// A request state answers one question, about one call, for one principal,
// as one operation; every other use is refused with an error that says
// which (never a new question), and only the yes runs.
func TestFleetRequestStateMisuse(t *testing.T) {
	f := newFleet(t, mini(t), tgmcp.Options{})
	h := &human{}
	cs := f.connect(t, "token-a", h, "", true)
	state := question(t, cs, "create_refund_draft", refund7, nil)
	first, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state)
	if err != nil || first.Code != guard.CodeOK || first.Delivery != guard.DeliveryFresh {
		t.Fatalf("the answer: %v %v", first, err)
	}

	damaged := map[string]any{"order_ref": "ORDER-7", "reason": "damaged"}
	tampered := state[:len(state)-4] + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, state[len(state)-4:])
	other := f.connect(t, "token-b", h, "", true)
	for _, c := range []struct {
		what, want string
		cs         *sdk.ClientSession
		args       any
		meta       sdk.Meta
		state      string
	}{
		{"for other arguments", "request_state_other_call", cs, damaged, nil, state},
		{"for another tool", "request_state_other_call", cs, map[string]any{"to": "a", "text": "b"}, nil, state},
		{"for another operation (another idempotency key)", "request_state_other_operation", cs, refund7, sdk.Meta{tgmcp.MetaIdempotencyKey: "another-key"}, state},
		{"for another operation (another operation id)", "request_state_other_operation", cs, refund7, sdk.Meta{tgmcp.MetaOperationID: "op-other"}, state},
		{"for another operation (another scope)", "request_state_other_operation", cs, refund7, sdk.Meta{tgmcp.MetaScope: "conversation-9"}, state},
		{"changed", "request_state_invalid", cs, refund7, nil, tampered},
		{"made up", "request_state_invalid", cs, refund7, nil, "tgq1.AAAA"},
		{"by another principal", "request_state_invalid", other, refund7, nil, state},
	} {
		name := "create_refund_draft"
		if c.what == "for another tool" {
			name = "send_note"
		}
		res, typ, err := answerCall(t, c.cs, name, c.args, c.meta, yes, c.state)
		if err == nil || typ != c.want {
			t.Errorf("a request state used %s: %v, %q, want the error %s", c.what, res, err, c.want)
		}
	}

	// The same answer again is the answered call re-issued: it replays.
	again, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state)
	if err != nil || again.Code != guard.CodeOK || again.Delivery != guard.DeliveryLocalReplay || string(again.Data) != string(first.Data) {
		t.Fatalf("the same answer again: %v %v, want a replay of %s", again, err, first)
	}

	// Declined, then sent again with a yes: refused.
	state2 := question(t, cs, "create_refund_draft", damaged, nil)
	declined, _, err := answerCall(t, cs, "create_refund_draft", damaged, nil, no, state2)
	if err != nil || declined.Code != guard.CodeApprovalRequired || declined.Message != guard.DeclinedMessage {
		t.Fatalf("declined: %v %v", declined, err)
	}
	if res, typ, err := answerCall(t, cs, "create_refund_draft", damaged, nil, yes, state2); typ != "request_state_answered" {
		t.Fatalf("a declined request state answered yes: %v %v", res, err)
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// An answer after the question's QuestionTTL runs nothing and is
// guard.Expired; its request state then takes no answer, even the same.
func TestFleetExpiredQuestion(t *testing.T) {
	clock := &stepClock{now: time.Now()}
	f := newFleet(t, mini(t), tgmcp.Options{Clock: clock})
	cs := f.connect(t, "token-a", &human{}, "", true)
	state := question(t, cs, "create_refund_draft", refund7, nil)
	clock.add(10*time.Minute + time.Millisecond)
	for range 2 {
		res, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state)
		if err != nil || res.Code != guard.CodeApprovalRequired || res.Message != guard.ExpiredMessage {
			t.Fatalf("an answer after expiry: %v %v, want APPROVAL_REQUIRED, expired", res, err)
		}
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("%d executions, want 0", n)
	}
}

// The answered call whose response was lost is re-issued (a new request,
// as 2026-07-28 has a client do): it replays the execution. The same
// answer POSTed twice, to both replicas: one execution.
func TestFleetReissuedAnswer(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		f := newFleet(t, rdb, tgmcp.Options{})
		cs := f.connect(t, "token-a", &human{}, "", true)
		state := question(t, cs, "create_refund_draft", refund7, nil)
		var lost sync.Once
		f.proxy.Lose = func(h mcptest.Hop) bool {
			lose := false
			if h.Answered {
				lost.Do(func() { lose = true })
			}
			return lose
		}
		if _, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state); err == nil {
			t.Fatal("the lost response reached the client")
		}
		if n := f.runs.Load(); n != 1 {
			t.Fatalf("%d executions behind the lost response, want 1", n)
		}
		res, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state)
		if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
			t.Fatalf("the re-issued answer: %v %v, want OK replayed", res, err)
		}

		// The same POST delivered twice, once to each replica.
		reason := map[string]any{"order_ref": "ORDER-7", "reason": "not_received"}
		state = question(t, cs, "create_refund_draft", reason, nil)
		f.proxy.Twice = func(h mcptest.Hop) bool { return h.Answered }
		res, _, err = answerCall(t, cs, "create_refund_draft", reason, nil, yes, state)
		if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
			t.Fatalf("the answer delivered twice: %v %v, want the second OK replayed", res, err)
		}
		if n := f.runs.Load(); n != 2 {
			t.Fatalf("%d executions for two refunds, want 2", n)
		}
	})
}

// go-sdk's own loop, with the answer's POST delivered to both replicas:
// one question, one execution, no error.
func TestFleetLoopAnswerDeliveredTwice(t *testing.T) {
	f := newFleet(t, mini(t), tgmcp.Options{})
	f.proxy.Twice = func(h mcptest.Hop) bool { return h.Answered }
	h := &human{}
	cs := f.connect(t, "token-a", h, "", false)
	res := mustCall(t, cs, &sdk.CallToolParams{Name: "create_refund_draft", Arguments: refund7})
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
		t.Fatalf("refund: %s, want OK, replayed by the second replica", res)
	}
	if n, runs := h.asked.Load(), f.runs.Load(); n != 1 || runs != 1 {
		t.Fatalf("asked %d times, %d executions, want 1 and 1", n, runs)
	}
}

// keyTransport adds idempotencyKey (SEP-3182) to the params of every
// tools/call it carries, as a client that speaks the proposal sends it;
// go-sdk's types have no such field. key is the raw JSON of the value, ""
// for none.
type keyTransport struct {
	token string
	mu    sync.Mutex
	key   string
}

func (k *keyTransport) set(rawKey string) {
	k.mu.Lock()
	k.key = rawKey
	k.mu.Unlock()
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.token)
	k.mu.Lock()
	key := k.key
	k.mu.Unlock()
	if r.Body != nil && key != "" {
		body, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil && string(m["method"]) == `"tools/call"` {
			var params map[string]json.RawMessage
			_ = json.Unmarshal(m["params"], &params)
			params["idempotencyKey"] = json.RawMessage(key)
			m["params"], _ = json.Marshal(params)
			body, _ = json.Marshal(m)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectKeyed connects go-sdk's client through a keyTransport.
func (f *fleet) connectKeyed(t *testing.T, token string, h *human) (*sdk.ClientSession, *keyTransport) {
	t.Helper()
	kt := &keyTransport{token: token}
	c := sdk.NewClient(&sdk.Implementation{Name: "keyed", Version: "v0"}, &sdk.ClientOptions{ElicitationHandler: h.elicit})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: kt}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, kt
}

// SEP-3182 on tools/call: the same idempotencyKey replays, on whichever
// replica; with other arguments it is a conflict; while the first call
// runs it is in progress; each error's data names the failure and the key.
// Another principal's same key is its own.
func TestFleetIdempotencyKey(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		f := newFleet(t, rdb, tgmcp.Options{})
		h := &human{}
		cs, kt := f.connectKeyed(t, "token-a", h)
		note := func(text string) (*guard.Result, error) {
			r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "send_note", Arguments: map[string]any{"to": "ops", "text": text}})
			if err != nil {
				return nil, err
			}
			return tgmcp.ModelResult(r)
		}
		kt.set(`"key-1"`)
		first, err := note("hello")
		if err != nil || first.Code != guard.CodeOK || first.Delivery != guard.DeliveryFresh {
			t.Fatalf("first: %v %v", first, err)
		}
		again, err := note("hello")
		if err != nil || again.Delivery != guard.DeliveryLocalReplay || string(again.Data) != string(first.Data) {
			t.Fatalf("the same key again: %v %v, want a replay", again, err)
		}
		_, err = note("goodbye")
		wantKeyError(t, err, tgmcp.CodeKeyConflict, tgmcp.KeyConflict, "key-1")

		gate := make(chan struct{})
		f.gate.Store(&gate)
		kt.set(`"key-2"`)
		done := make(chan error, 1)
		go func() {
			res, err := note("slow")
			if err == nil && res.Code != guard.CodeOK {
				err = errors.New(res.String())
			}
			done <- err
		}()
		f.waitStarted(t)
		_, err = note("slow")
		wantKeyError(t, err, tgmcp.CodeKeyInProgress, tgmcp.KeyInProgress, "key-2")
		close(gate)
		if err := <-done; err != nil {
			t.Fatalf("the slow call: %v", err)
		}
		f.gate.Store(nil)

		// Another principal's key-1 is another key.
		csB, ktB := f.connectKeyed(t, "token-b", h)
		ktB.set(`"key-1"`)
		r, err := csB.CallTool(context.Background(), &sdk.CallToolParams{Name: "send_note", Arguments: map[string]any{"to": "ops", "text": "hello"}})
		if res, _ := tgmcp.ModelResult(r); err != nil || res.Delivery != guard.DeliveryFresh {
			t.Fatalf("tenant-b's key-1: %v %v, want a fresh run", res, err)
		}

		// A keyed write that needs approval: asked once, run once, and
		// the same key again replays without a question.
		kt.set(`"key-3"`)
		for i, want := range []guard.Delivery{guard.DeliveryFresh, guard.DeliveryLocalReplay} {
			res := mustCall(t, cs, &sdk.CallToolParams{Name: "create_refund_draft", Arguments: refund7})
			if res.Code != guard.CodeOK || res.Delivery != want {
				t.Fatalf("keyed refund %d: %s, want OK %s", i, res, want)
			}
		}
		if n := h.asked.Load(); n != 1 {
			t.Fatalf("asked %d times, want 1", n)
		}
		if n := f.runs.Load(); n != 4 {
			t.Fatalf("%d executions, want 4 (two notes of tenant-a, one of tenant-b, one refund)", n)
		}

		// A key that is not a non-empty string, or that disagrees with
		// _meta's: invalid params, nothing runs.
		for _, raw := range []string{`7`, `""`, `{"k":1}`} {
			kt.set(raw)
			if _, err := note("x"); !isCode(err, jsonrpc.CodeInvalidParams) {
				t.Errorf("idempotencyKey %s: %v, want invalid params", raw, err)
			}
		}
		kt.set(`"key-4"`)
		_, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "send_note", Arguments: map[string]any{"to": "a", "text": "b"},
			Meta: sdk.Meta{tgmcp.MetaIdempotencyKey: "key-5"}})
		if !isCode(err, jsonrpc.CodeInvalidParams) {
			t.Errorf("idempotencyKey and _meta disagree: %v, want invalid params", err)
		}
		if n := f.runs.Load(); n != 4 {
			t.Fatalf("%d executions after the refused calls, want 4", n)
		}
	})
}

// wantKeyError fails unless err is the JSON-RPC error of SEP-3182 with
// code, data.type typ and data.idempotencyKey key.
func wantKeyError(t *testing.T, err error, code int64, typ, key string) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("want the JSON-RPC error %s, got %v", typ, err)
	}
	var data map[string]string
	_ = json.Unmarshal(werr.Data, &data)
	if werr.Code != code || data["type"] != typ || data["idempotencyKey"] != key || len(data) != 2 {
		t.Fatalf("error %d %s %s, want %d with data {type: %s, idempotencyKey: %s}", werr.Code, werr.Message, werr.Data, code, typ, key)
	}
}

// isCode reports whether err is a JSON-RPC error with code.
func isCode(err error, code int64) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == code
}

// Nothing of a question or a task is kept for ever: an answer lives until
// its question's expiry and 24 hours more (to replay a re-issued call), a
// task and its operation's claim until an hour after its question's
// expiry, each by a TTL in Redis.
func TestStateStoreForgets(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	f := newFleet(t, rdb, tgmcp.Options{})
	cs := f.connect(t, "token-a", &human{}, "", true)
	state := question(t, cs, "create_refund_draft", refund7, nil)
	if _, _, err := answerCall(t, cs, "create_refund_draft", refund7, nil, yes, state); err != nil {
		t.Fatal(err)
	}
	w := f.wire(t, "token-a", mcptest.TasksCaps())
	w.CreateTask("create_refund_draft", map[string]any{"order_ref": "ORDER-7", "reason": "damaged"})
	kinds := func() map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, k := range mr.Keys() {
			if rest, ok := strings.CutPrefix(k, f.prefix+"mcp:"); ok {
				kind, _, _ := strings.Cut(rest, ":")
				out[kind] = mr.TTL(k)
			}
		}
		return out
	}
	got := kinds()
	if len(got) != 3 || got["answer"] <= 24*time.Hour || got["answer"] > 24*time.Hour+10*time.Minute ||
		got["task"] <= time.Hour || got["task"] > time.Hour+10*time.Minute || got["optask"] <= 0 || got["optask"] > 10*time.Minute {
		t.Fatalf("keys and TTLs %v, want an answer (24 h 10 min), a task (1 h 10 min) and its operation's claim (10 min)", got)
	}
	mr.FastForward(time.Hour + 10*time.Minute + time.Second)
	if got := kinds(); len(got) != 1 || got["answer"] == 0 {
		t.Fatalf("after 1 h 10 min: %v, want the answer alone", got)
	}
	mr.FastForward(24 * time.Hour)
	if got := kinds(); len(got) != 0 {
		t.Fatalf("after 25 h 10 min: %v, want nothing", got)
	}
}

// The server advertises what it honours: capabilities.tools.idempotency
// (SEP-3182) and the Tasks extension, in server/discover (2026-07-28) and
// in initialize (2025-11-25).
func TestCapabilities(t *testing.T) {
	f := newFleet(t, mini(t), tgmcp.Options{})
	discovered := f.wire(t, "token-a", map[string]any{}).Must("server/discover", nil)
	st, body := (&rawSession{t: t, url: f.url, token: "token-a"}).post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	var initialized struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &initialized); err != nil || st != http.StatusOK {
		t.Fatalf("initialize: %d %s", st, body)
	}
	for what, res := range map[string]map[string]any{"server/discover": discovered, "initialize": initialized.Result} {
		caps, _ := res["capabilities"].(map[string]any)
		tools, _ := caps["tools"].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := tools[tgmcp.IdempotencyCapability].(map[string]any); !ok {
			t.Errorf("%s: capabilities %v without tools.idempotency", what, caps)
		}
		if _, ok := ext[tgmcp.TasksExtension].(map[string]any); !ok {
			t.Errorf("%s: capabilities %v without the Tasks extension", what, caps)
		}
	}
	if v, _ := discovered["supportedVersions"].([]any); len(v) == 0 || v[0] != "2026-07-28" {
		t.Errorf("server/discover: supportedVersions %v", discovered["supportedVersions"])
	}
}
