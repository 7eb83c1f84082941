package agentloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
)

// The principals of the orders world: user1 owns ORDER-7, user2 owns ORDER-8.
var (
	user1 = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	user2 = guard.Principal{TenantID: "tenant-a", SubjectID: "user-2"}
)

const (
	refundArgs   = `{"order_ref":"ORDER-7","reason":"duplicate"}`
	readArgs     = `{"order_ref":"ORDER-7"}`
	refundTool   = "create_refund_draft"
	readTool     = "get_order"
	testDeadline = 20 * time.Second
)

// world is one test's fake provider, order service, Redis and loop.
type world struct {
	t      *testing.T
	srv    *fakemodel.OpenAIServer
	client oai.Client
	svc    *orders.Service
	mr     *miniredis.Miniredis
	rdb    redis.UniversalClient
	idem   guard.AuditStore
}

// store is the world's Redis store, made once.
func (w *world) store() guard.AuditStore {
	if w.idem == nil {
		w.idem = idemStore(w.t, w.rdb)
	}
	return w.idem
}

// idemStore is a Redis store on the client.
func idemStore(t testing.TB, rdb redis.UniversalClient) guard.AuditStore {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newWorld starts a fake Responses server playing turns, a fresh order
// service and a miniredis; everything is closed when the test ends.
func newWorld(t *testing.T, turns ...fakemodel.Turn) *world {
	t.Helper()
	srv := fakemodel.NewOpenAI(turns...)
	t.Cleanup(srv.Close)
	mr, rdb := redistest.Mini(t)
	return &world{
		t:      t,
		srv:    srv,
		client: newClient(srv),
		svc:    orders.NewService(),
		mr:     mr,
		rdb:    rdb,
	}
}

// model is the Responses provider over the client, asking the scripted
// model.
func model(client oai.Client) *tgopenai.Model {
	return tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model"})
}

func newClient(srv *fakemodel.OpenAIServer) oai.Client {
	return oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(2))
}

// loop returns a loop over the world's client, tools and Redis.
func (w *world) loop(opts ...agentloop.Options) *agentloop.Loop {
	w.t.Helper()
	var o agentloop.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Store == nil {
		o.Store = w.store()
	}
	l := agentloop.New(model(w.client), orders.Tools(w.svc), o)
	if err := l.Err(); err != nil {
		w.t.Fatalf("New: %v", err)
	}
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	return ctx
}

// approver approves everything and records what it was asked.
type approver struct {
	mu   sync.Mutex
	reqs []host.ApprovalRequest
	n    atomic.Int32
}

func (a *approver) Approve(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	a.mu.Unlock()
	a.n.Add(1)
	return host.Decision{Approved: true, Approver: "ann"}, nil
}

func (a *approver) asked() []host.ApprovalRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]host.ApprovalRequest(nil), a.reqs...)
}

// calls builds one turn of function calls.
func calls(cs ...fakemodel.Call) fakemodel.Turn { return fakemodel.Turn{Calls: cs} }

func call(id, name, args string) fakemodel.Call {
	return fakemodel.Call{CallID: id, Name: name, Arguments: args}
}

// output is one function_call_output the loop sent, decoded.
type output struct {
	CallID string
	Raw    string
	Result guard.Result
}

// outputsOf decodes every function_call_output of a request, failing the
// test when one is not a tool-model-result-v2 object.
func outputsOf(t *testing.T, req fakemodel.OpenAIRequest) []output {
	t.Helper()
	var out []output
	for _, o := range req.Results() {
		r, err := o.ModelResult()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, output{CallID: o.CallID, Raw: o.Output, Result: r})
	}
	return out
}

// lastOutputs decodes the outputs of a request inside a Respond callback,
// where failing the test is not possible; bad outputs are skipped.
func lastOutputs(req fakemodel.Request) []guard.Result {
	var out []guard.Result
	for _, o := range req.Results() {
		if r, err := o.ModelResult(); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// byCallID indexes outputs by call id, failing on a call id answered twice.
func byCallID(t *testing.T, outs []output) map[string]output {
	t.Helper()
	m := map[string]output{}
	for _, o := range outs {
		if _, dup := m[o.CallID]; dup {
			t.Fatalf("call id %s answered twice", o.CallID)
		}
		m[o.CallID] = o
	}
	return m
}

// okRequests returns the requests the server answered with 200.
func okRequests(srv *fakemodel.OpenAIServer) []fakemodel.OpenAIRequest {
	var out []fakemodel.OpenAIRequest
	for _, r := range srv.Requests() {
		if r.StatusCode == 200 {
			out = append(out, r)
		}
	}
	return out
}

// checkChain asserts that every answered request continues the one before
// it with previous_response_id, and that none was rejected.
func checkChain(t *testing.T, srv *fakemodel.OpenAIServer) {
	t.Helper()
	reqs := srv.Requests()
	prev := ""
	for i, r := range reqs {
		if r.StatusCode != 200 {
			t.Fatalf("request %d answered %d: %s", i, r.StatusCode, r.Body)
		}
		if r.PreviousResponseID != prev {
			t.Errorf("request %d: previous_response_id %q, want %q", i, r.PreviousResponseID, prev)
		}
		prev = r.ResponseID
	}
}

func kinds(tr agentloop.Transcript) string {
	var b []string
	for _, e := range tr {
		b = append(b, string(e.Kind))
	}
	return strings.Join(b, ",")
}

func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, want)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// draftOf decodes the draft of an OK create_refund_draft result.
func draftOf(t *testing.T, r guard.Result) orders.Draft {
	t.Helper()
	var d orders.Draft
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("draft data %s: %v", r.Data, err)
	}
	return d
}
