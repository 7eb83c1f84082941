package tgtemporal_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var (
	user1   = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	tenantB = guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}
	key     = bytes.Repeat([]byte("temporal-test-key/"), 2)
)

const (
	refundTool = "create_refund_draft"
	readTool   = "get_order"
	refundDup  = `{"order_ref":"ORDER-7","reason":"duplicate"}`
	readArgs   = `{"order_ref":"ORDER-7"}`
)

// world is one test's downstream (the orders service), guard store and
// fake model; runner builds a worker's Runner over them, as a new process
// would.
type world struct {
	t     *testing.T
	srv   *fakemodel.OpenAIServer
	svc   *orders.Service
	store guard.Store
	tools func(*orders.Service) *toolset.Set // default orders.Tools
	// stateless makes the model's client send the whole conversation each
	// turn, for a model that answers by it.
	stateless bool
}

func newWorld(t *testing.T, store guard.Store, turns ...fakemodel.Turn) *world {
	t.Helper()
	srv := fakemodel.NewOpenAI(turns...)
	t.Cleanup(srv.Close)
	if store == nil {
		store = guard.NewMemStore(guard.MemStoreOptions{})
	}
	return &world{t: t, srv: srv, svc: orders.NewService(), store: store}
}

// redisStore is an idem store on rdb.
func redisStore(t *testing.T, rdb redis.UniversalClient) guard.Store {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)}) // the call ids of the scripts recur across tests
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runner is a worker's Runner: its own guard, host and provider client
// over the world's store, downstream and model.
func (w *world) runner() *durable.Runner {
	w.t.Helper()
	signer, err := guard.NewSigner(key)
	if err != nil {
		w.t.Fatal(err)
	}
	mk := w.tools
	if mk == nil {
		mk = orders.Tools
	}
	tools := mk(w.svc)
	g := guard.New(tools, w.store, guard.Options{Signer: signer})
	h, err := host.New(g, tools, host.Options{Provider: "openai", APIFamily: "responses", Signer: signer})
	if err != nil {
		w.t.Fatal(err)
	}
	client := oai.NewClient(option.WithBaseURL(w.srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	return &durable.Runner{Host: h, Provider: tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model", Stateless: w.stateless})}
}

// fastRetries are the test's dispatch options: the defaults' timeout, and
// retries without the defaults' one-second backoff.
func fastRetries() tgtemporal.Options {
	d := tgtemporal.DefaultDispatchOptions()
	d.RetryPolicy.InitialInterval, d.RetryPolicy.MaximumInterval = 10*time.Millisecond, 50*time.Millisecond
	return tgtemporal.Options{Dispatch: d}
}

// env is a test workflow environment (the SDK's, which runs the workflow
// and its activities in process) with the workflow and the activities of
// r registered, and the worker interceptors given.
func env(t *testing.T, r *durable.Runner, opts tgtemporal.Options, runID string, ics ...interceptor.WorkerInterceptor) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger) // the SDK's debug lines, a screen a test, would bury a failure in CI's log
	e := s.NewTestWorkflowEnvironment()
	e.SetTestTimeout(30 * time.Second)
	// The workflow runs in the test's process beside its activities: under
	// -race on a busy machine it can wait for the CPU past the deadlock
	// detector's default second, which is no deadlock.
	e.SetWorkerOptions(worker.Options{Interceptors: ics, DeadlockDetectionTimeout: 20 * time.Second})
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	if _, err := tgtemporal.Register(e, r, opts); err != nil {
		t.Fatal(err)
	}
	return e
}

// approveWhenAsked answers every question the run asks with d, from
// outside the workflow: the query, then the signal, as an approver's
// process does through a client.
func approveWhenAsked(t *testing.T, e *testsuite.TestWorkflowEnvironment, d host.Decision) *[]host.ApprovalRequest {
	return approveWhenAskedAt(t, e, d, new(time.Time))
}

// approveWhenAskedAt is approveWhenAsked that records in at, in workflow
// time, when it sent the last decision.
func approveWhenAskedAt(t *testing.T, e *testsuite.TestWorkflowEnvironment, d host.Decision, at *time.Time) *[]host.ApprovalRequest {
	var asked []host.ApprovalRequest
	var poll func()
	poll = func() {
		v, err := e.QueryWorkflow(tgtemporal.PendingName)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		var req *host.ApprovalRequest
		if err := v.Get(&req); err != nil {
			t.Errorf("query result: %v", err)
			return
		}
		if req != nil && (len(asked) == 0 || asked[len(asked)-1].OperationID != req.OperationID) {
			asked = append(asked, *req)
			*at = e.Now()
			e.SignalWorkflow(tgtemporal.DecisionName, durable.AnswerTo(*req, d))
		}
		e.RegisterDelayedCallback(poll, time.Minute)
	}
	e.RegisterDelayedCallback(poll, time.Minute)
	return &asked
}

// result is the workflow's result, failing the test on its error.
func result(t *testing.T, e *testsuite.TestWorkflowEnvironment) *durable.Result {
	t.Helper()
	if !e.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := e.GetWorkflowError(); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	var res durable.Result
	if err := e.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// outputs decodes the function_call_outputs the model was sent, by call id.
func outputs(t *testing.T, srv *fakemodel.OpenAIServer) map[string]guard.Result {
	t.Helper()
	m, err := srv.ModelResults()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// faultyDispatch is a worker interceptor: around the dispatch attempts
// that carry a human's decision it runs fault, which decides how the
// attempt's real execution (next) is seen by Temporal.
type faultyDispatch struct {
	interceptor.WorkerInterceptorBase
	mu       sync.Mutex
	attempts int
	fault    func(attempt int, ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error)
}

func (f *faultyDispatch) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &faultyActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, f: f}
}

type faultyActivity struct {
	interceptor.ActivityInboundInterceptorBase
	f *faultyDispatch
}

func (a *faultyActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if len(in.Args) == 1 {
		if d, ok := in.Args[0].(durable.DispatchInput); ok && d.Decision != nil {
			a.f.mu.Lock()
			a.f.attempts++
			n := a.f.attempts
			a.f.mu.Unlock()
			return a.f.fault(n, ctx, in, a.Next)
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}

func (f *faultyDispatch) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// lostReply is an error as the server reports an attempt whose completion
// it never got.
func lostReply(what string) error { return temporal.NewApplicationError(what, "test.LostReply") }

var _ workflow.Context // the workflow package is the shim's; tests use it through the env

// hangingTools are the orders tools whose refund, once the draft is made,
// waits for hang before it replies: a slow reply after the side effect.
func hangingTools(hang <-chan struct{}) func(*orders.Service) *toolset.Set {
	return func(svc *orders.Service) *toolset.Set {
		get := orders.Tools(svc).Lookup(readTool).(toolset.Declared)
		refund := toolset.Write(refundTool, "Create a refund draft for an order. Needs a human's approval.",
			func(ctx context.Context, inv *guard.Invocation, in orders.RefundInput) (orders.Draft, error) {
				d, err := svc.CreateDraft(ctx, inv.IdempotencyKey, inv.Principal.TenantID, in.OrderRef, in.Reason)
				<-hang
				return d, err
			}, &toolset.Options[orders.RefundInput, orders.Draft]{
				NeedsApproval: true,
				Authorize: func(_ context.Context, inv *guard.Invocation, in orders.RefundInput) error {
					if owner, ok := svc.Owner(inv.Principal.TenantID, in.OrderRef); !ok || owner != inv.Principal.SubjectID {
						return guard.ErrNotFound
					}
					return nil
				},
				Receipt: func(ctx context.Context, inv *guard.Invocation) (orders.Draft, bool, error) {
					return svc.Receipt(ctx, inv.IdempotencyKey)
				},
			})
		return toolset.MustNew(get, refund)
	}
}

// quietLogger keeps the SDK's warnings and errors out of the test's
// output: the tests assert what matters.
var quietLogger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
