package tgdbos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/provider"
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
	readTool   = frameworktest.ReadTool
	refundTool = frameworktest.RefundTool
	noteTool   = frameworktest.NoteTool
)

// The call ids the scripted model gives its calls (without a run's tag).
const (
	readCall   = frameworktest.ReadCall
	refundCall = frameworktest.RefundCall
	noteCall   = frameworktest.NoteCall
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

// shop is the downstream system: each execution of a write is a row of a
// Postgres table the test owns (tg_writes), which a SIGKILL does not lose;
// a write's receipt is its row under the downstream idempotency key.
type shop struct {
	db *pgxpool.Pool
	// enter and after, if set, run inside each write, before and after
	// its side effect (a test's kill points).
	enter, after func(tool string)
}

// shopSchema is the test's own tables: the shop's writes, the
// notifications the deduplicating notifier took (one row per key) and
// every call it got.
const shopSchema = `
CREATE TABLE IF NOT EXISTS tg_writes (n bigserial PRIMARY KEY, run_id text NOT NULL, tool text NOT NULL, idem_key text NOT NULL, result text NOT NULL);
CREATE TABLE IF NOT EXISTS tg_notices (key text PRIMARY KEY, run_id text NOT NULL);
CREATE TABLE IF NOT EXISTS tg_notify_calls (n bigserial PRIMARY KEY, key text NOT NULL, run_id text NOT NULL);`

// openShop connects to the database at url and makes the shop's tables.
func openShop(ctx context.Context, url string) (*pgxpool.Pool, error) {
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(ctx, shopSchema); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// count is a count(*) query's answer.
func count(ctx context.Context, db *pgxpool.Pool, query string, args ...any) int {
	var n int
	if err := db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		panic(err)
	}
	return n
}

// executions returns how many times tool's side effect ran in run.
func (s *shop) executions(ctx context.Context, run, tool string) int {
	return count(ctx, s.db, "SELECT count(*) FROM tg_writes WHERE run_id = $1 AND tool = $2", run, tool)
}

// write is a write tool's side effect: a row, the output its result.
func write[Out any](ctx context.Context, s *shop, inv *guard.Invocation, out Out) (Out, error) {
	tool := inv.Proposal.Name
	if s.enter != nil {
		s.enter(tool)
	}
	b, _ := json.Marshal(out)
	if _, err := s.db.Exec(ctx, "INSERT INTO tg_writes (run_id, tool, idem_key, result) VALUES ($1, $2, $3, $4)",
		inv.Context.Scope, tool, inv.IdempotencyKey, string(b)); err != nil {
		return out, err
	}
	if s.after != nil {
		s.after(tool)
	}
	return out, nil
}

// receipt is a write tool's receipt: the result of its row under the key.
func receipt[Out any](ctx context.Context, s *shop, inv *guard.Invocation) (out Out, found bool, err error) {
	var res string
	err = s.db.QueryRow(ctx, "SELECT result FROM tg_writes WHERE idem_key = $1 ORDER BY n LIMIT 1", inv.IdempotencyKey).Scan(&res)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, false, nil
	}
	if err != nil {
		return out, false, err
	}
	return out, true, json.Unmarshal([]byte(res), &out)
}

// notify is the deduplicating notifier: every call is a row of
// tg_notify_calls, and the notification itself a row of tg_notices under
// the question's key, taken once.
func (s *shop) notify(ctx context.Context, key string, req host.ApprovalRequest) error {
	if _, err := s.db.Exec(ctx, "INSERT INTO tg_notify_calls (key, run_id) VALUES ($1, $2)", key, req.RunID); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, "INSERT INTO tg_notices (key, run_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, req.RunID)
	return err
}

// tools are the shop's tools; with tx the note is a transactional write
// (pgstore.WriteTx), its row written in the store's transaction.
func (s *shop) tools(tx bool) *toolset.Set {
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
		func(ctx context.Context, inv *guard.Invocation, in refundIn) (draftOut, error) {
			return write(ctx, s, inv, draftOut{DraftID: "DRAFT-" + in.OrderRef})
		}, &toolset.Options[refundIn, draftOut]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"},
			Authorize: func(ctx context.Context, inv *guard.Invocation, in refundIn) error {
				return owns(ctx, inv, in.OrderRef)
			},
			Receipt: func(ctx context.Context, inv *guard.Invocation) (draftOut, bool, error) {
				return receipt[draftOut](ctx, s, inv)
			}})
	var note toolset.Declared = toolset.Write(noteTool, "Add a note to an order.",
		func(ctx context.Context, inv *guard.Invocation, in noteIn) (noteOut, error) {
			return write(ctx, s, inv, noteOut{NoteID: "NOTE-" + in.OrderRef})
		}, &toolset.Options[noteIn, noteOut]{Authorize: func(ctx context.Context, inv *guard.Invocation, in noteIn) error {
			return owns(ctx, inv, in.OrderRef)
		},
			Receipt: func(ctx context.Context, inv *guard.Invocation) (noteOut, bool, error) {
				return receipt[noteOut](ctx, s, inv)
			}})
	if tx {
		note = pgstore.WriteTx(noteTool, "Add a note to an order.",
			func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in noteIn) (noteOut, error) {
				out := noteOut{NoteID: "NOTE-" + in.OrderRef}
				if s.enter != nil {
					s.enter(noteTool)
				}
				b, _ := json.Marshal(out)
				if _, err := tx.Exec(ctx, "INSERT INTO tg_writes (run_id, tool, idem_key, result) VALUES ($1, $2, $3, $4)",
					inv.Context.Scope, noteTool, inv.IdempotencyKey, string(b)); err != nil {
					return out, err
				}
				if s.after != nil {
					s.after(noteTool)
				}
				return out, nil
			}, &toolset.Options[noteIn, noteOut]{Authorize: func(ctx context.Context, inv *guard.Invocation, in noteIn) error {
				return owns(ctx, inv, in.OrderRef)
			}})
	}
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
	// Runs are the runs the child starts (none: the child only recovers
	// them); it waits for each and prints its result.
	Runs []durable.Run `json:"runs"`
	// Stagger spreads the starts of Runs over up to that long.
	Stagger time.Duration `json:"stagger,omitempty"`
	// Executor is the process's DBOS executor id ("": DBOS's default).
	Executor string `json:"executor,omitempty"`
	// OnePostgres keeps the guard's records in the Postgres database too
	// (pgstore, instead of idem over Redis), declares the note tool
	// transactional (pgstore.WriteTx) and gives the Agent a DBOS data
	// source on the database, so that the note's dispatch is a DBOS
	// transaction.
	OnePostgres bool `json:"one_postgres,omitempty"`
}

// hooks are a world's kill points and wrappers; the zero value has none.
type hooks struct {
	wrap         func(provider.Provider) provider.Provider
	interceptors []guard.Interceptor
	enter, after func(tool string)
	// notified, if set, runs inside Notify after the notification.
	notified func()
	// options, if set, changes the Agent's options (testOptions).
	options func(*tgdbos.Options)
}

// world is one process's side of a test: Redis, the shop, the guard,
// the runner over the fake model, and a DBOS context with the Agent
// registered (not launched).
type world struct {
	env    env
	rdb    redis.UniversalClient
	shop   *shop
	store  guard.AuditStore // idem's, or pgstore's with OnePostgres
	pool   *pgxpool.Pool
	guard  *guard.Guard
	runner *durable.Runner
	dc     dbos.Context
	agent  *tgdbos.Agent
}

// quietLogger is DBOS's logger in tests: errors, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// testOptions are the Agent's options in tests: a minute to decide, a
// poll a second, no retried turns.
func testOptions(notify func(context.Context, string, host.ApprovalRequest) error) tgdbos.Options {
	return tgdbos.Options{Notify: notify, ApprovalTimeout: time.Minute, DecisionPoll: time.Second, TurnRetries: -1}
}

// buildWorld builds e's world with h's kill points and wrappers.
func buildWorld(ctx context.Context, e env, h hooks) (*world, error) {
	opts, err := redis.ParseURL(e.Redis)
	if err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	var st guard.AuditStore
	if !e.OnePostgres {
		if st, err = idem.New(rdb, idem.Options{Prefix: e.Prefix, AllowEviction: true}); err != nil {
			return nil, err
		}
	}
	// DBOS creates the database: the shop's tables come after it.
	dc, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: e.Postgres, AppName: "tgdbos-test", ExecutorID: e.Executor,
		ApplicationVersion: "test", StartupTimeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	db, err := openShop(ctx, e.Postgres)
	if err != nil {
		_ = dbos.Shutdown(dc, time.Second)
		return nil, err
	}
	var ds *dbos.DataSource
	if e.OnePostgres {
		// The guard's records and DBOS's in one database, through the
		// shop's pool, which is the data source too.
		if st, err = pgstore.New(ctx, db, pgstore.Options{}); err != nil {
			return nil, err
		}
		if ds, err = dbos.NewDataSource(dc, db, dbos.WithDataSourceName("shop")); err != nil {
			return nil, err
		}
	}
	sh := &shop{db: db, enter: h.enter, after: h.after}
	set := sh.tools(e.OnePostgres)
	signer, err := guard.NewSigner(signingKey)
	if err != nil {
		return nil, err
	}
	g := guard.New(set, st, guard.Options{Signer: signer, Interceptors: h.interceptors})
	hst, err := host.New(g, set, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		return nil, err
	}
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(e.Model), option.WithAPIKey("test"), option.WithMaxRetries(0)),
		tgopenai.ModelOptions{Stateless: true})
	r := durable.Runner{Host: hst, Provider: model, Instructions: "You are the shop's refund agent."}
	if h.wrap != nil {
		r.Provider = h.wrap(model)
	}
	notify := func(ctx context.Context, key string, req host.ApprovalRequest) error {
		if err := sh.notify(ctx, key, req); err != nil {
			return err
		}
		if h.notified != nil {
			h.notified()
		}
		return nil
	}
	o := testOptions(notify)
	o.DataSource = ds
	if h.options != nil {
		h.options(&o)
	}
	a, err := tgdbos.Register(dc, &r, o)
	if err != nil {
		return nil, err
	}
	return &world{env: e, rdb: rdb, shop: sh, store: st, guard: g, runner: &r, dc: dc, agent: a}, nil
}

// close shuts DBOS down and closes Redis and the shop.
func (w *world) close() {
	_ = dbos.Shutdown(w.dc, 10*time.Second)
	_ = w.rdb.Close()
	w.shop.db.Close()
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
//   - "refund ORDER-7" (with " #tag", a run's own call ids):
//     frameworktest.RefundScript, get_order, then create_refund_draft
//     (which needs approval), then add_order_note, one call a turn, then a
//     final text naming the codes and ids the tools answered; a tagged run's
//     model takes 50 to 300 ms a turn;
//   - "status OP": the status tool for operation OP, then its code.
func script(req fakemodel.Request) *fakemodel.Turn {
	input := frameworktest.UserInput(req)
	if op, ok := strings.CutPrefix(input, "status "); ok {
		for _, o := range req.Results() {
			if o.CallID == statusCall {
				return &fakemodel.Turn{Text: "status: " + frameworktest.CodeOf(o.Output)}
			}
		}
		return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: toolset.StatusToolName, CallID: statusCall,
			Arguments: fmt.Sprintf(`{"operation_id":%q,"tool":null}`, op)}}}
	}
	if strings.Contains(input, " #") {
		// A model takes its time: runs killed at random moments are then
		// at every stage of their run.
		time.Sleep(time.Duration(50+mrand.IntN(250)) * time.Millisecond)
	}
	return frameworktest.RefundScript(req)
}

// modelServer starts the fake model for a test: the script, for as many
// requests as a test makes (n at most).
func modelServer(t *testing.T, n int) *fakemodel.OpenAIServer {
	t.Helper()
	turns := make([]fakemodel.Turn, n)
	for i := range turns {
		turns[i] = fakemodel.Turn{Respond: script}
	}
	srv := fakemodel.NewOpenAI(turns...)
	t.Cleanup(srv.Close)
	return srv
}
