// Package agentloop wraps an OpenAI Responses agent loop so that every tool
// call the model makes is typed, checked, authorized, approved where it must
// be, run at most once and audited — in about three lines:
//
//	client := openai.NewClient()
//	loop := agentloop.New(client, tools, agentloop.WithStore(rdb))
//	res, err := loop.Run(ctx, principal, "refund my duplicate order ORDER-7")
//
// The loop sends the toolset's strict function definitions, reads every
// function_call of a response in order, dispatches each through the guard,
// answers with function_call_output items chained by previous_response_id,
// and stops at a final message, the turn limit, an approval it must wait
// for, or the context's end.
//
// Operation ids and idempotency keys are derived from the run id and the
// call's fingerprint (tool and canonical arguments) unless the host supplies
// them (WithKeys): the same intent asked twice in one run replays instead of
// acting twice, and a run restarted with the same run id (WithRunID) replays
// what already happened.
package agentloop

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/audit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/toolset"
)

// DefaultModel is the model used when WithModel is not given.
const DefaultModel = "gpt-5.4-mini"

// DefaultStatusTool is the name of the built-in status tool.
const DefaultStatusTool = "query_operation_status"

// DefaultMaxTurns bounds the model turns of one run.
const DefaultMaxTurns = 12

// Loop runs agent turns against the Responses API with every tool call
// going through a guard. It is safe for concurrent use by several runs.
type Loop struct {
	client     oai.Client
	tools      *toolset.Set
	guard      *guard.Guard
	store      Store
	signer     *guard.Signer
	approver   Approver
	model      string
	instr      string
	maxTurns   int
	statusTool string
	keys       KeyFunc
	clock      guard.Clock
	grantTTL   time.Duration
	defs       []responses.ToolUnionParam
	observer   func(Event)
	guardOpts  []func(*guard.Options)
	tracer     trace.Tracer
	agentName  string
	closers    []func()
	err        error
}

// Option configures a Loop.
type Option func(*Loop)

// WithStore keeps idempotency records and audit logs in Redis (a server or
// a cluster). Without it the loop uses an embedded miniredis, which is
// fine for examples and tests and loses everything when the process ends.
func WithStore(rdb redis.UniversalClient) Option {
	return func(l *Loop) {
		if rdb == nil {
			l.err = errors.New("agentloop: WithStore needs a Redis client")
			return
		}
		s, err := idem.New(rdb, idem.Options{})
		if err != nil {
			l.err = err
			return
		}
		l.store = s
	}
}

// Store is what the loop keeps its records in: a guard.Store whose audit
// log can be read back (idem.Store and memstore.Store are both).
type Store interface {
	guard.Store
	audit.Log
}

// WithGuardStore uses any Store.
func WithGuardStore(s Store) Option { return func(l *Loop) { l.store = s } }

// WithSigner signs and checks approval grants. Without it a random key is
// made per Loop, so grants minted by another process do not verify: pass
// one to resume saved runs elsewhere.
func WithSigner(s *guard.Signer) Option { return func(l *Loop) { l.signer = s } }

// WithApprover asks a human inline when a write needs approval. Without it
// the run pauses and returns the pending requests (see Resume).
func WithApprover(a Approver) Option { return func(l *Loop) { l.approver = a } }

// WithModel sets the model; default DefaultModel.
func WithModel(model string) Option { return func(l *Loop) { l.model = model } }

// WithInstructions sets the system instructions.
func WithInstructions(s string) Option { return func(l *Loop) { l.instr = s } }

// WithMaxTurns bounds the model turns of one run; default DefaultMaxTurns.
func WithMaxTurns(n int) Option { return func(l *Loop) { l.maxTurns = n } }

// WithStatusTool names the built-in status tool the model may call to
// settle an unknown outcome; default DefaultStatusTool. "" removes it.
func WithStatusTool(name string) Option { return func(l *Loop) { l.statusTool = name } }

// WithKeys lets the host supply operation ids and idempotency keys.
func WithKeys(f KeyFunc) Option { return func(l *Loop) { l.keys = f } }

// WithClock sets the guard's clock (approval expiry, leases).
func WithClock(c guard.Clock) Option { return func(l *Loop) { l.clock = c } }

// WithGrantTTL sets how long a grant minted from an Approver's yes is valid;
// default 5 minutes.
func WithGrantTTL(d time.Duration) Option { return func(l *Loop) { l.grantTTL = d } }

// WithObserver receives every transcript event as it happens, e.g. to print
// a live transcript.
func WithObserver(f func(Event)) Option { return func(l *Loop) { l.observer = f } }

// WithGuardOptions adjusts the guard's options before it is built: add
// interceptors (package observe), Checks (package ratelimit), a lease.
// Clock and Signer are the loop's (WithClock, WithSigner).
func WithGuardOptions(f func(*guard.Options)) Option {
	return func(l *Loop) { l.guardOpts = append(l.guardOpts, f) }
}

// WithTracerProvider traces runs: an "invoke_agent {name}" span per run and
// Resume, a "chat {model}" child span per model turn, under which the tool
// spans of package observe nest. Default: the global provider, a no-op
// unless the host set one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(l *Loop) { l.tracer = tp.Tracer(tracerName) }
}

// WithAgentName names the agent in run spans; default "agent".
func WithAgentName(name string) Option { return func(l *Loop) { l.agentName = name } }

const tracerName = "github.com/toolguard/toolguard/agentloop"

// New returns a loop over the client and tools. Configuration errors are
// reported by Run (and Err).
func New(client oai.Client, tools *toolset.Set, opts ...Option) *Loop {
	l := &Loop{client: client, tools: tools, model: DefaultModel, maxTurns: DefaultMaxTurns,
		statusTool: DefaultStatusTool, clock: guard.SystemClock, grantTTL: 5 * time.Minute}
	for _, o := range opts {
		o(l)
	}
	if l.err != nil {
		return l
	}
	if l.store == nil {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			l.err = err
			return l
		}
		rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
		l.closers = append(l.closers, func() { _ = rdb.Close(); mr.Close() })
		l.store, _ = idem.New(rdb, idem.Options{})
	}
	if l.signer == nil {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		l.signer, _ = guard.NewSigner(key)
	}
	if l.statusTool != "" && tools.Lookup(l.statusTool) != nil {
		l.err = errors.New("agentloop: a tool is named like the status tool " + l.statusTool + "; choose another name with WithStatusTool")
		return l
	}
	gopts := guard.Options{}
	for _, f := range l.guardOpts {
		f(&gopts)
	}
	gopts.Clock, gopts.Signer = l.clock, l.signer
	l.guard = guard.New(tools, l.store, gopts)
	if l.tracer == nil {
		l.tracer = otel.GetTracerProvider().Tracer(tracerName)
	}
	if l.agentName == "" {
		l.agentName = "agent"
	}
	l.defs = tgopenai.Tools(tools)
	if l.statusTool != "" {
		l.defs = append(l.defs, statusToolDef(l.statusTool))
	}
	return l
}

// Err reports a configuration error, if any.
func (l *Loop) Err() error { return l.err }

// Guard returns the loop's guard, e.g. to dispatch calls outside a run.
func (l *Loop) Guard() *guard.Guard { return l.guard }

// Store returns the loop's store, e.g. to verify its audit log.
func (l *Loop) Store() Store { return l.store }

// Signer returns the loop's approval signer.
func (l *Loop) Signer() *guard.Signer { return l.signer }

// Close releases the embedded store, if the loop made one.
func (l *Loop) Close() {
	for _, c := range l.closers {
		c()
	}
	l.closers = nil
}

// QueryStatus asks for the outcome of an operation, as the model's status
// tool does.
func (l *Loop) QueryStatus(ctx context.Context, p guard.Principal, operationID string) (*guard.Result, error) {
	if l.err != nil {
		return nil, l.err
	}
	return l.guard.QueryStatus(ctx, guard.StatusCall{Principal: p, OperationID: operationID,
		Context: guard.ExecutionContext{Provider: tgopenai.Provider, APIFamily: tgopenai.APIFamily, AdapterRevision: tgopenai.Revision}})
}
