package host

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// Options configure a Host. The zero value of every field means its
// default.
type Options struct {
	// Provider, APIFamily and AdapterRevision name the framework in every
	// execution context, and so in every audit record.
	Provider, APIFamily, AdapterRevision string
	// Principal returns who the call acts for, from the host's context
	// (its session, its token), never from the model. An error fails the
	// call as a host error (wrapping ErrNoPrincipal): nothing runs.
	// Default: PrincipalFrom.
	Principal func(ctx context.Context) (guard.Principal, error)
	// Scope names where the same intent is one operation: the framework's
	// run, session or workflow id (guard.ExecutionContext.Scope). Default:
	// ScopeFrom; "" applies no scope (each call id is its own operation).
	Scope func(ctx context.Context) string
	// Call, if set, sees each guard call before it is dispatched (and the
	// execution context of each status query): the host may set fields
	// the framework does not carry, such as an operation id, an
	// idempotency key or a grant it obtained elsewhere.
	Call func(ctx context.Context, call *guard.Call)
	// Signer signs the grants minted from a human's yes; it must be the
	// guard's (guard.Options.Signer). Without one nobody is asked:
	// APPROVAL_REQUIRED reaches the model as a result, and grants come
	// only through Call.
	Signer *guard.Signer
	// GrantTTL is how long a grant minted from a yes is valid; default
	// DefaultGrantTTL.
	GrantTTL time.Duration
	// Clock is the time grants are minted at; use the guard's. Default
	// guard.SystemClock.
	Clock guard.Clock
	// Approver, if set, is asked while the call waits instead of pausing
	// the run: its yes becomes the grant the call runs with, its no (or
	// its error) the denial the model gets. Needs Signer.
	Approver Approver
	// NoInterrupt answers APPROVAL_REQUIRED to the model instead of
	// handing the question back for the framework to pause on (when there
	// is no Approver), for hosts that obtain grants out of band.
	NoInterrupt bool
	// StatusTool names the status tool offered to the model; default
	// toolset.StatusToolName.
	StatusTool string
	// NoStatusTool leaves the status tool out: the model cannot settle an
	// unknown outcome itself.
	NoStatusTool bool
	// Denials keeps the noes of a run, so that the same intent in the same
	// scope gets the same answer without a human being asked again.
	// Default: in this process (a Denials of the Host's); a framework
	// with session state keeps them there.
	Denials DenialStore
}

// DenialStore keeps the intents humans declined, by principal, scope
// (ApprovalRequest.RunID) and fingerprint.
type DenialStore interface {
	// Has reports whether a human declined req's intent in its scope.
	Has(ctx context.Context, req ApprovalRequest) bool
	// Add remembers that a human declined req.
	Add(ctx context.Context, req ApprovalRequest)
}

// processDenials is a Denials as a DenialStore.
type processDenials struct{ d Denials }

func (p *processDenials) Has(_ context.Context, req ApprovalRequest) bool { return p.d.Has(req) }
func (p *processDenials) Add(_ context.Context, req ApprovalRequest)      { p.d.Add(req) }

// Host is the framework-neutral step around a framework's tool calls: a
// guard, the tool set it runs, and the host's options. It is safe for
// concurrent use.
type Host struct {
	g      *guard.Guard
	opts   Options
	status *toolset.Tool[toolset.StatusInput, struct{}]
	tools  []toolset.Declared
	nulls  map[string]map[string]any // strict schemas, by tool name, for absent nullable members
}

// New returns the Host over g, whose tools are set: every tool of set must
// be the one g looks up by its name, and have a schema to offer the model.
// It fails for a status tool name model providers do not accept, or one a
// tool of set has, and for an Approver without a Signer.
func New(g *guard.Guard, set *toolset.Set, opts Options) (*Host, error) {
	if g == nil || set == nil {
		return nil, errors.New("host: New needs a guard and its tool set")
	}
	if opts.Principal == nil {
		opts.Principal = PrincipalFrom
	}
	if opts.Scope == nil {
		opts.Scope = ScopeFrom
	}
	if opts.GrantTTL <= 0 {
		opts.GrantTTL = DefaultGrantTTL
	}
	if opts.Clock == nil {
		opts.Clock = guard.SystemClock
	}
	if opts.Approver != nil && opts.Signer == nil {
		return nil, errors.New("host: Options.Approver needs Options.Signer to mint the grants")
	}
	if opts.Denials == nil {
		opts.Denials = &processDenials{}
	}
	h := &Host{g: g, opts: opts, nulls: map[string]map[string]any{}}
	decls := set.Tools()
	if !opts.NoStatusTool {
		st, err := statusTool(opts.StatusTool)
		if err != nil {
			return nil, err
		}
		if set.Lookup(st.Name()) != nil {
			return nil, fmt.Errorf("host: the tool set already has a tool named %q, the status tool's name", st.Name())
		}
		h.status = st
		decls = append(decls, st)
	}
	for _, d := range decls {
		if (h.status == nil || d.Name() != h.status.Name()) && !sameTool(g.Tools().Lookup(d.Name()), d) {
			return nil, fmt.Errorf("host: the guard does not run tool %q of the set: build the guard over the same set", d.Name())
		}
		if d.Schema() == nil {
			return nil, fmt.Errorf("host: tool %q has no schema to offer the model", d.Name())
		}
		if d.Schema().Strict() {
			h.nulls[d.Name()] = d.Schema().Map()
		}
	}
	h.tools = decls
	return h, nil
}

// statusTool declares the status tool under name, refusing a name model
// providers do not accept instead of panicking as toolset does.
func statusTool(name string) (st *toolset.Tool[toolset.StatusInput, struct{}], err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("host: status tool name %q: %v", name, r)
		}
	}()
	return toolset.StatusTool(name), nil
}

// sameTool reports whether the guard's tool is the set's; tools of a type
// that cannot be compared are taken on trust rather than panicking.
func sameTool(a guard.Tool, b toolset.Declared) bool {
	if a == nil {
		return false
	}
	if ta, tb := reflect.TypeOf(a), reflect.TypeOf(b); ta != tb || !ta.Comparable() {
		return ta == tb
	}
	return a == guard.Tool(b)
}

// Guard returns the guard the host dispatches through.
func (h *Host) Guard() *guard.Guard { return h.g }

// Options returns the host's options, with their defaults applied.
func (h *Host) Options() Options { return h.opts }

// Tools returns the tools to offer the model: the set's, in its order,
// and the status tool last (unless Options.NoStatusTool).
func (h *Host) Tools() []toolset.Declared { return append([]toolset.Declared(nil), h.tools...) }

// StatusTool returns the status tool, nil under Options.NoStatusTool.
func (h *Host) StatusTool() *toolset.Tool[toolset.StatusInput, struct{}] { return h.status }

// IsStatus reports whether name is the status tool's.
func (h *Host) IsStatus(name string) bool { return h.status != nil && name == h.status.Name() }

// Arguments returns a call's arguments as the guard gets them: with an
// absent nullable member of the tool's strict schema read as null (a
// framework does not say whether the model was held to the schema:
// contract section 3), and no arguments as an empty object.
func (h *Host) Arguments(name string, args []byte) []byte {
	if len(args) == 0 {
		return []byte(`{}`)
	}
	if m, ok := h.nulls[name]; ok {
		return provider.FillNulls(m, args)
	}
	return args
}

// Frame is what a framework knows of one tool call: the tool's name, its
// arguments as JSON, and the framework's ids for the call and for the
// reply or invocation that carried it.
type Frame struct {
	Name       string
	Arguments  []byte
	CallID     string
	ResponseID string
}

// Call builds the guard call of a framework's tool call: the principal
// and the scope from the host's functions of ctx, the arguments with an
// absent nullable member of a strict schema read as null (a framework
// does not say whether the model was held to the schema: contract section
// 3), the framework's names and ids in the execution context, and then
// Options.Call. A host function that fails or panics is an error: nothing
// runs.
func (h *Host) Call(ctx context.Context, f Frame) (guard.Call, error) {
	var p guard.Principal
	if err := Safely(func() (err error) { p, err = h.opts.Principal(ctx); return err }); err != nil {
		if errors.Is(err, ErrNoPrincipal) || errors.Is(err, ErrHostPanic) {
			return guard.Call{}, fmt.Errorf("no principal for tool call %q: %w", f.Name, err)
		}
		return guard.Call{}, fmt.Errorf("no principal for tool call %q: %w: %w", f.Name, ErrNoPrincipal, err)
	}
	var scope string
	if err := Safely(func() error { scope = h.opts.Scope(ctx); return nil }); err != nil {
		return guard.Call{}, fmt.Errorf("scope of tool call %q: %w", f.Name, err)
	}
	return h.CallFor(ctx, p, scope, f)
}

// CallFor builds the guard call of a tool call whose principal and scope
// the host already has (a durable run's, from its input) instead of from
// its functions of ctx: the arguments as Arguments reads them, the
// framework's names and ids in the execution context, and then
// Options.Call, whose failure or panic is an error.
func (h *Host) CallFor(ctx context.Context, p guard.Principal, scope string, f Frame) (guard.Call, error) {
	call := guard.Call{Principal: p, Proposal: guard.Proposal{Name: f.Name, Arguments: h.Arguments(f.Name, f.Arguments)},
		Context: guard.ExecutionContext{Provider: h.opts.Provider, APIFamily: h.opts.APIFamily,
			AdapterRevision: h.opts.AdapterRevision, ResponseID: guard.SafeID(f.ResponseID),
			CallID: guard.SafeID(f.CallID), Scope: scope}}
	if h.opts.Call != nil {
		if err := Safely(func() error { h.opts.Call(ctx, &call); return nil }); err != nil {
			return guard.Call{}, fmt.Errorf("Options.Call for tool call %q: %w", f.Name, err)
		}
	}
	return call, nil
}
