// Package agentloop wraps an agent loop over any model provider so that
// every tool call the model makes is typed, checked, authorized, approved
// where it must be, run at most once and audited — in about three lines:
//
//	client := openai.NewClient()
//	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), tools, agentloop.Options{Store: store}) // store: an idem.Store
//	res, err := loop.Run(ctx, principal, "refund my duplicate order ORDER-7")
//
// The provider is an adapter's Model: adapters/openai (Responses),
// adapters/chat (Chat Completions) or adapters/anthropic (Messages); each
// implements provider.Provider over its official SDK. The loop offers the
// toolset, reads every tool call of a reply in order, dispatches each
// through the guard, answers with the provider's tool-result items, and
// stops at a final message, the turn limit, an approval it must wait for, a
// reply that did not end normally (cut short, refused, failed: see Status),
// or the context's end. Stream runs the same loop and yields its events as
// they happen, text deltas included.
//
// The loop keeps the conversation itself, in the provider's wire format,
// unless the provider keeps it (Responses with store, chained by
// previous_response_id); a paused run's State then carries everything it
// needs to resume in another process.
//
// Operation ids and idempotency keys are derived from the run id and the
// call's fingerprint (tool and canonical arguments) unless the host supplies
// them (Options.Keys): the same intent asked twice in one run replays
// instead of acting twice, and a run restarted with the same run id
// (RunOptions.RunID) replays what already happened.
package agentloop

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// DefaultMaxTurns bounds the model turns of one run.
const DefaultMaxTurns = 12

// defaultParallel bounds how many calls of one reply are dispatched at
// once when Options.Parallel is 0.
const defaultParallel = 8

// Options configures a Loop. The zero value is a working configuration:
// an embedded store, a random signing key, no approver (runs pause), the
// status tool, DefaultMaxTurns.
type Options struct {
	// Store keeps idempotency records and audit logs: an idem.Store on
	// Redis (a server or a cluster), a guard.MemStore, or any guard.AuditStore. nil
	// keeps them in memory (a guard.MemStore of the loop's own), which is
	// fine for examples and tests and loses everything when the process
	// ends.
	Store guard.AuditStore
	// Signer signs and checks approval grants. Without it a random key
	// is made per Loop, so grants minted by another process do not
	// verify: pass one to resume saved runs elsewhere.
	Signer *guard.Signer
	// Approver asks a human inline when a write needs approval. Without
	// it the run pauses and returns the pending requests (see Resume).
	Approver host.Approver
	// Instructions is the system prompt.
	Instructions string
	// MaxTurns bounds the model turns of one run; 0 means
	// DefaultMaxTurns.
	MaxTurns int
	// Parallel bounds how many calls of one reply are dispatched at once;
	// 0 means 8, 1 dispatches them one after another. Their
	// results go back, and their events reach the transcript, in the
	// provider's order whatever order they finish in; calls of one
	// operation (the same intent of a write) run one after another; the
	// Approver is asked for one call at a time, once the calls before it
	// have finished.
	Parallel int
	// StatusTool names the built-in status tool the model may call to
	// settle an unknown outcome; "" means toolset.StatusToolName, and "-"
	// offers none.
	StatusTool string
	// Keys lets the host supply the operation id and idempotency key of
	// a write in a run; fingerprint is guard.Fingerprint of the call's
	// tool and arguments. nil means guard.ScopeIDs with the run id as the
	// scope: within one run the same tool with the same canonical
	// arguments is one operation, asked again it is replayed, never run
	// twice; another run is another operation. A Repeatable tool's calls
	// get no Keys ids: each is its own operation.
	Keys func(runID string, call guard.Proposal, fingerprint string) (operationID, idempotencyKey string)
	// Clock is the guard's clock (approval expiry, leases); nil means
	// guard.SystemClock.
	Clock guard.Clock
	// GrantTTL is how long a grant minted from an Approver's yes is
	// valid; 0 means host.DefaultGrantTTL.
	GrantTTL time.Duration
	// Observer receives every transcript event as it happens, e.g. to
	// print a live transcript.
	Observer func(Event)
	// Guard holds the guard's options: interceptors (package observe),
	// Checks (package ratelimit), a lease. Its Clock and Signer are the
	// loop's: set them here or in Clock and Signer above, not both with
	// different values (New reports that as a configuration error).
	Guard guard.Options
	// TracerProvider traces runs: an "invoke_agent {name}" span per run
	// and Resume, a "chat {model}" child span per model turn, under which
	// the tool spans of package observe nest. nil means the global
	// provider, a no-op unless the host set one.
	TracerProvider trace.TracerProvider
	// AgentName names the agent in run spans; "" means "agent".
	AgentName string
}

// Loop runs agent turns against a model provider with every tool call
// going through a guard. It is safe for concurrent use by several runs.
type Loop struct {
	provider   provider.Provider
	info       provider.Info
	tools      *toolset.Set
	offered    []toolset.Declared
	guard      *guard.Guard
	store      guard.AuditStore
	signer     *guard.Signer
	approver   host.Approver
	instr      string
	maxTurns   int
	parallel   int
	statusTool string
	keys       keyFunc
	clock      guard.Clock
	grantTTL   time.Duration
	observer   func(Event)
	tracer     trace.Tracer
	agentName  string
	err        error
}

const tracerName = "github.com/toolguard/toolguard/agentloop"

// New returns a loop over the provider (an adapter's Model) and tools.
// Configuration errors are reported by Run (and Err).
func New(p provider.Provider, tools *toolset.Set, opts Options) *Loop {
	l := &Loop{provider: p, tools: tools, signer: opts.Signer, approver: opts.Approver, instr: opts.Instructions,
		maxTurns: opts.MaxTurns, parallel: opts.Parallel, statusTool: opts.StatusTool, keys: opts.Keys, clock: opts.Clock,
		grantTTL: opts.GrantTTL, observer: opts.Observer, agentName: opts.AgentName, store: opts.Store}
	if p == nil || tools == nil {
		l.err = errors.New("agentloop: New needs a provider and a tool set")
		return l
	}
	l.info = p.Info()
	if l.maxTurns <= 0 {
		l.maxTurns = DefaultMaxTurns
	}
	if l.parallel <= 0 {
		l.parallel = defaultParallel
	}
	switch l.statusTool {
	case "":
		l.statusTool = toolset.StatusToolName
	case "-":
		l.statusTool = ""
	}
	gopts := opts.Guard
	switch {
	case l.clock == nil:
		l.clock = gopts.Clock
	case gopts.Clock != nil:
		l.err = errors.New("agentloop: Options.Clock and Options.Guard.Clock are both set; set one")
		return l
	}
	switch {
	case l.signer == nil:
		l.signer = gopts.Signer
	case gopts.Signer != nil && gopts.Signer != l.signer:
		l.err = errors.New("agentloop: Options.Signer and Options.Guard.Signer are both set, to different signers; set one")
		return l
	}
	if l.keys == nil {
		l.keys = scopeKeys
	}
	if l.clock == nil {
		l.clock = guard.SystemClock
	}
	if l.grantTTL <= 0 {
		l.grantTTL = host.DefaultGrantTTL
	}
	if l.agentName == "" {
		l.agentName = "agent"
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	l.tracer = tp.Tracer(tracerName)
	if l.store == nil {
		l.store = guard.NewMemStore(guard.MemStoreOptions{})
	}
	if l.signer == nil {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		l.signer, _ = guard.NewSigner(key)
	}
	l.offered = tools.Tools()
	if l.statusTool != "" {
		if tools.Lookup(l.statusTool) != nil {
			l.err = errors.New("agentloop: a tool is named like the status tool " + l.statusTool + "; choose another name with Options.StatusTool")
			return l
		}
		l.offered = append(l.offered, toolset.StatusTool(l.statusTool))
	}
	gopts.Clock, gopts.Signer = l.clock, l.signer
	l.guard = guard.New(tools, l.store, gopts)
	return l
}

// Err reports a configuration error, if any.
func (l *Loop) Err() error { return l.err }

// Guard returns the loop's guard, e.g. to dispatch calls outside a run.
func (l *Loop) Guard() *guard.Guard { return l.guard }

// Store returns the loop's store, e.g. to verify its audit log.
func (l *Loop) Store() guard.AuditStore { return l.store }

// Signer returns the loop's approval signer.
func (l *Loop) Signer() *guard.Signer { return l.signer }

// Provider names the loop's provider adapter and model.
func (l *Loop) Provider() provider.Info { return l.info }

// QueryStatus asks for the outcome of an operation, as the model's status
// tool does.
func (l *Loop) QueryStatus(ctx context.Context, p guard.Principal, operationID string) (*guard.Result, error) {
	if l.err != nil {
		return nil, l.err
	}
	return l.guard.QueryStatus(ctx, guard.StatusCall{Principal: p, OperationID: operationID,
		Context: l.info.Context("", "")})
}
