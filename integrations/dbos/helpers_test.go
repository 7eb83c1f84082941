package tgdbos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/agentloop/provider"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// The principals: acme owns ORDER-7, globex owns ORDER-9.
var (
	acme   = guard.Principal{TenantID: "acme", SubjectID: "alice"}
	globex = guard.Principal{TenantID: "globex", SubjectID: "gus"}
)

// signingKey is the grant key every process of a test shares.
var signingKey = []byte("tgdbos-test-signing-key-32-bytes!")

// The tools of the shop.
const (
	readTool   = "get_order"
	refundTool = "create_refund_draft"
	noteTool   = "add_order_note"
)

// The call ids the scripted model gives its three calls.
const (
	readCall   = "call_read"
	refundCall = "call_refund"
	noteCall   = "call_note"
	statusCall = "call_status"
)

type orderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order."`
}

type refundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged"`
}

type noteIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order."`
	Text     string `json:"text" jsonschema:"description=The note."`
}

type orderOut struct {
	OrderRef string `json:"order_ref"`
	Status   string `json:"status"`
}

type draftOut struct {
	DraftID string `json:"draft_id"`
}

type noteOut struct {
	NoteID string `json:"note_id"`
}

var owners = map[string]string{"ORDER-7": "acme", "ORDER-9": "globex"}

// shop is the downstream system: its writes count their executions in
// Redis (keys under prefix), which a SIGKILL does not lose.
type shop struct {
	rdb    redis.UniversalClient
	prefix string
	// after, if set, runs after each write's side effect, inside the tool
	// function (a test's kill point).
	after func(tool string)
}

func (s *shop) execKey(tool string) string { return s.prefix + "execs:" + tool }

// executions returns how many times tool's side effect ran.
func (s *shop) executions(ctx context.Context, tool string) int {
	n, err := s.rdb.Get(ctx, s.execKey(tool)).Int()
	if err != nil && err != redis.Nil {
		panic(err)
	}
	return n
}

func (s *shop) tools() *toolset.Set {
	owns := func(_ context.Context, inv *guard.Invocation, ref string) error {
		if owners[ref] != inv.Principal.TenantID {
			return guard.ErrNotFound
		}
		return nil
	}
	get := toolset.Read(readTool, "Look up one of the user's orders.",
		func(_ context.Context, _ *guard.Invocation, in orderIn) (orderOut, error) {
			return orderOut{OrderRef: in.OrderRef, Status: "paid"}, nil
		}, &toolset.Options[orderIn, orderOut]{Authorize: func(ctx context.Context, inv *guard.Invocation, in orderIn) error {
			return owns(ctx, inv, in.OrderRef)
		}})
	refund := toolset.Write(refundTool, "Draft a refund of an order.",
		func(ctx context.Context, _ *guard.Invocation, in refundIn) (draftOut, error) {
			if err := s.rdb.Incr(ctx, s.execKey(refundTool)).Err(); err != nil {
				return draftOut{}, err
			}
			if s.after != nil {
				s.after(refundTool)
			}
			return draftOut{DraftID: "DRAFT-" + in.OrderRef}, nil
		}, &toolset.Options[refundIn, draftOut]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"},
			Authorize: func(ctx context.Context, inv *guard.Invocation, in refundIn) error {
				return owns(ctx, inv, in.OrderRef)
			}})
	note := toolset.Write(noteTool, "Add a note to an order.",
		func(ctx context.Context, _ *guard.Invocation, in noteIn) (noteOut, error) {
			if err := s.rdb.Incr(ctx, s.execKey(noteTool)).Err(); err != nil {
				return noteOut{}, err
			}
			if s.after != nil {
				s.after(noteTool)
			}
			return noteOut{NoteID: "NOTE-" + in.OrderRef}, nil
		}, &toolset.Options[noteIn, noteOut]{Authorize: func(ctx context.Context, inv *guard.Invocation, in noteIn) error {
			return owns(ctx, inv, in.OrderRef)
		}})
	return toolset.MustNew(get, refund, note)
}

// env is what a process of a test needs to build its world: the Postgres
// database, the Redis server and key prefix, the fake model's URL.
type env struct {
	Postgres string `json:"postgres"`
	Redis    string `json:"redis"`
	Prefix   string `json:"prefix"`
	Model    string `json:"model"`
	// Kill names the child's kill point ("" none).
	Kill string `json:"kill,omitempty"`
	// Run is the run the child starts (its id "" starts none: the child
	// only recovers).
	Run durable.Run `json:"run"`
}

// world is one process's side of a test: Redis, the shop, the guard,
// the runner over the fake model, and a DBOS context with the Agent
// registered (not launched).
type world struct {
	rdb    redis.UniversalClient
	shop   *shop
	store  *idem.Store
	guard  *guard.Guard
	runner *durable.Runner
	dc     dbos.Context
	agent  *tgdbos.Agent
}

// quietLogger is DBOS's logger in tests: errors, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// buildWorld builds e's world; interceptors wrap the guard, provider
// wraps the model, after runs inside the writes.
func buildWorld(ctx context.Context, e env, wrap func(provider.Provider) provider.Provider, interceptors []guard.Interceptor,
	after func(string), notify func(context.Context, host.ApprovalRequest) error) (*world, error) {
	opts, err := redis.ParseURL(e.Redis)
	if err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	st, err := idem.New(rdb, idem.Options{Prefix: e.Prefix, AllowEviction: true})
	if err != nil {
		return nil, err
	}
	sh := &shop{rdb: rdb, prefix: e.Prefix, after: after}
	set := sh.tools()
	signer, err := guard.NewSigner(signingKey)
	if err != nil {
		return nil, err
	}
	g := guard.New(set, st, guard.Options{Signer: signer, Interceptors: interceptors})
	h, err := host.New(g, set, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		return nil, err
	}
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(e.Model), option.WithAPIKey("test"), option.WithMaxRetries(0)),
		tgopenai.ModelOptions{Stateless: true})
	r := durable.Runner{Host: h, Provider: model, Instructions: "You are the shop's refund agent."}
	if wrap != nil {
		r.Provider = wrap(model)
	}
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: e.Postgres, AppName: "tgdbos-test",
		ApplicationVersion: "test", StartupTimeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	a, err := tgdbos.Register(dc, &r, tgdbos.Options{Notify: notify, ApprovalTimeout: time.Minute, TurnRetries: -1})
	if err != nil {
		return nil, err
	}
	return &world{rdb: rdb, shop: sh, store: st, guard: g, runner: &r, dc: dc, agent: a}, nil
}

// close shuts DBOS down and closes Redis.
func (w *world) close() {
	_ = dbos.Shutdown(w.dc, 10*time.Second)
	_ = w.rdb.Close()
}

// redisFor returns the Redis URL and a fresh key prefix for a test: the
// real server of TOOLGUARD_REDIS_URL when set, else a miniredis (over
// TCP, which a child process reaches too).
func redisFor(t *testing.T) (url, prefix string) {
	t.Helper()
	if u := strings.TrimSpace(os.Getenv(redistest.EnvURL)); u != "" {
		redistest.Standalone(t) // fails the test when the server is down
		return u, redistest.Prefix(t)
	}
	mr, _ := redistest.Mini(t)
	return "redis://" + mr.Addr() + "/0", "tgdbos:"
}

// script is the fake model: it answers by the conversation's content,
// never by how many requests came before, so that a turn a recovered
// workflow asks again gets the same answer.
//
//   - "refund ORDER-7": get_order, then create_refund_draft (which
//     needs approval), then add_order_note, one call a turn, then a final
//     text naming the codes and ids the tools answered;
//   - "status OP": the status tool for operation OP, then its code.
func script(req openaitest.Request) *openaitest.Turn {
	outs := map[string]string{}
	for _, o := range req.FunctionCallOutputs() {
		outs[o.CallID] = o.Output
	}
	var input string
	for _, it := range req.Input {
		if it.Type == "message" && it.Role == "user" {
			input = it.Text
			break
		}
	}
	if op, ok := strings.CutPrefix(input, "status "); ok {
		if out, done := outs[statusCall]; done {
			return &openaitest.Turn{Text: "status: " + codeOf(out)}
		}
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: toolset.StatusToolName, CallID: statusCall,
			Arguments: fmt.Sprintf(`{"operation_id":%q,"tool":null}`, op)}}}
	}
	ref := strings.TrimPrefix(input, "refund ")
	switch {
	case outs[readCall] == "":
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: readTool, CallID: readCall,
			Arguments: fmt.Sprintf(`{"order_ref":%q}`, ref)}}}
	case outs[refundCall] == "":
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: refundTool, CallID: refundCall,
			Arguments: fmt.Sprintf(`{"order_ref":%q,"reason":"duplicate"}`, ref)}}}
	case outs[noteCall] == "":
		return &openaitest.Turn{Calls: []openaitest.Call{{Name: noteTool, CallID: noteCall,
			Arguments: fmt.Sprintf(`{"order_ref":%q,"text":"refund drafted"}`, ref)}}}
	}
	return &openaitest.Turn{Text: fmt.Sprintf("read %s; refund %s %s; note %s %s", codeOf(outs[readCall]),
		codeOf(outs[refundCall]), field(outs[refundCall], "draft_id"), codeOf(outs[noteCall]), field(outs[noteCall], "note_id"))}
}

// codeOf is a model result's code.
func codeOf(result string) string {
	var r struct {
		Code string `json:"code"`
	}
	if json.Unmarshal([]byte(result), &r) != nil || r.Code == "" {
		return "?"
	}
	return r.Code
}

// field finds a string member name anywhere in a model result.
func field(result, name string) string {
	var v any
	if json.Unmarshal([]byte(result), &v) != nil {
		return "?"
	}
	var find func(any) string
	find = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x[name].(string); ok {
				return s
			}
			for _, m := range x {
				if s := find(m); s != "" {
					return s
				}
			}
		case []any:
			for _, m := range x {
				if s := find(m); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if s := find(v); s != "" {
		return s
	}
	return "-"
}

// modelServer starts the fake model for a test: the script, for as many
// requests as a test makes.
func modelServer(t *testing.T) *openaitest.Server {
	t.Helper()
	turns := make([]openaitest.Turn, 400)
	for i := range turns {
		turns[i] = openaitest.Turn{Respond: script}
	}
	srv := openaitest.NewServer(turns...)
	t.Cleanup(srv.Close)
	return srv
}
