package approvals_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
)

var (
	user1  = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	leadA  = guard.Principal{TenantID: "tenant-a", SubjectID: "lead-a", Roles: []string{approvals.DefaultRole}}
	leadA2 = guard.Principal{TenantID: "tenant-a", SubjectID: "lead-a2", Roles: []string{approvals.DefaultRole}}
	leadB  = guard.Principal{TenantID: "tenant-b", SubjectID: "lead-b", Roles: []string{approvals.DefaultRole}}
)

const refundArgs = `{"order_ref":"ORDER-7","reason":"duplicate"}`

// world is a test's fake provider, order service, store and loop on one
// Redis.
type world struct {
	t      *testing.T
	srv    *fakemodel.OpenAIServer
	svc    *orders.Service
	rdb    redis.UniversalClient
	loop   *agentloop.Loop
	store  *approvals.Queue
	now    time.Time
	key    []byte // the signer's, and the queue's secret key
	prefix string
}

// newWorld builds a world on rdb whose model plays turns. The store's clock
// is the world's now, which tests move.
func newWorld(t *testing.T, rdb redis.UniversalClient, turns ...fakemodel.Turn) *world {
	t.Helper()
	w := &world{t: t, srv: fakemodel.NewOpenAI(turns...), svc: orders.NewService(), rdb: rdb, now: time.Now()}
	t.Cleanup(w.srv.Close)
	w.key = make([]byte, 32)
	_, _ = rand.Read(w.key)
	signer, _ := guard.NewSigner(w.key)
	client := oai.NewClient(option.WithBaseURL(w.srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	tools := orders.Tools(w.svc)
	w.prefix = redistest.Prefix(t)
	w.loop = agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), tools, agentloop.Options{Store: w.guardStore(rdb), Signer: signer})
	var err error
	w.store, err = approvals.NewQueue(rdb, approvals.Options{Prefix: w.prefix, Tools: tools, TTL: time.Hour, SecretKey: w.key,
		Clock: guard.ClockFunc(func() time.Time { return w.now })})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// guardStore is an idem store under the world's prefix, so that tests
// sharing a real server do not replay each other's calls.
func (w *world) guardStore(rdb redis.UniversalClient) guard.AuditStore {
	s, err := idem.New(rdb, idem.Options{Prefix: w.prefix + "idem:"})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refundTurns: the model reads nothing and drafts the refund; told no, it
// asks once more, then answers with what the tool said.
func refundTurns() []fakemodel.Turn {
	draft := fakemodel.Call{Name: "create_refund_draft", Arguments: refundArgs}
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{draft}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, o := range req.Results() {
				if guardCode(o.Output) == guard.CodeOK {
					return &fakemodel.Turn{Text: "drafted"}
				}
			}
			return &fakemodel.Turn{Calls: []fakemodel.Call{draft}}
		}},
		{Text: "not drafted"},
	}
}

// park runs the refund agent until it pauses and parks it.
func (w *world) park(ctx context.Context) (*agentloop.RunResult, []*approvals.Request) {
	w.t.Helper()
	res, err := w.loop.Run(ctx, user1, "refund ORDER-7")
	if err != nil {
		w.t.Fatal(err)
	}
	if res.Status != agentloop.StatusPaused {
		w.t.Fatalf("run %s, want paused", res.Status)
	}
	reqs, err := w.store.Park(ctx, res)
	if err != nil {
		w.t.Fatal(err)
	}
	return res, reqs
}
