package tgadk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// The names this integration gives itself in every execution context, and
// so in every audit record.
const (
	provider        = "google-adk"
	apiFamily       = "adk-go"
	adapterRevision = "adk-go-v2"
)

// Options configure a Guarded: the host step's options (host.Options,
// embedded: the options every integration takes) and ADK's own. Principal
// is required; the zero value of every other field means its default.
//
// The host functions of host.Options (Principal, Scope, Call) are called
// with the ADK context of the tool call, an agent.Context (which
// implements context.Context): a host that needs ADK's ids (UserID,
// SessionID, InvocationID, State) asserts it, as SessionScope does:
//
//	Principal: func(ctx context.Context) (guard.Principal, error) {
//		actx, ok := ctx.(agent.Context)
//		if !ok {
//			return guard.Principal{}, host.ErrNoPrincipal
//		}
//		return session(actx.UserID())
//	},
//
// What ADK makes of host.Options: Principal returns who the call acts for,
// from the ADK context (the host's session or token behind UserID), never
// from the model's arguments; an error, a panic or a principal
// guard.Principal.Validate refuses stops the call before the guard sees
// it: the model is told that the call could not be authorized, nothing
// runs. Scope defaults to SessionScope (InvocationScope names the
// invocation instead; "" gives no scope: every call id is its own
// operation). Call also sees the status tool's call before its status
// query. Without a Signer (use the guard's), a write that needs approval
// is answered APPROVAL_REQUIRED and no confirmation is asked; with
// NoInterrupt too (and no Approver). Approver,
// with Signer, is asked instead of ADK's confirmation and the call waits
// for its decision, as agentloop's Options.Approver (approvals.Waiter puts
// the request in the approvals inbox); the request's RunID is the call's
// scope. GrantTTL and Clock are those of the grants minted from a
// confirmation (use the guard's clock). Provider, APIFamily and
// AdapterRevision default to this package's names, and Denials to the ADK
// session's state.
type Options struct {
	host.Options
	// Decide turns the human's answer to a confirmation into the host's
	// decision, the shape agentloop uses: approved or not, by whom (the
	// grant's and the audit record's approver), a reason told to the
	// model on a denial, and Expired for a denial that should not stop
	// the intent being asked again. req is what was asked, computed from
	// the call ADK runs again, not from the client's answer. Default: as
	// the answer says (ToolConfirmation.Confirmed), approved by the ADK
	// user who answered (ctx.UserID()). A host whose approver must not
	// be the requester, or must hold a role, refuses here.
	Decide func(ctx agent.Context, answer *toolconfirmation.ToolConfirmation, req ConfirmationPayload) host.Decision
	// AllowUnguarded, if set, makes Plugin fail closed: a tool that does
	// not dispatch through a guard (an ADK tool the host did not Import)
	// runs only if AllowUnguarded returns true for it, and is otherwise
	// answered UNKNOWN_TOOL without running. Allow ADK's own control
	// tools the agents need (transfer_to_agent, exit_loop, agent tools).
	// Nil: Plugin leaves unguarded tools to run as ADK runs them.
	AllowUnguarded func(t tool.Tool) bool
	// Toolsets are imported ADK toolsets (ImportToolset) the agent is
	// given beside the set's tools (Guarded.Toolsets); the guard must find
	// their tools too (guard.New over Join).
	Toolsets []*Toolset
}

// Guarded is a guard's tools as ADK tools, and the callbacks that send the
// rest of an agent's tool calls through the guard. It is safe for
// concurrent use.
type Guarded struct {
	h      *host.Host
	g      *guard.Guard
	set    *toolset.Set
	opts   Options
	tools  []tool.Tool
	status string
}

// New returns the tools of set as ADK tools that dispatch through g, plus
// the status tool. set is the guard's tools (g was made with guard.New
// over set, or over a guard.Tools that finds the same tools). It fails
// without opts.Principal: the principal comes from the host, never from
// the model.
func New(g *guard.Guard, set *toolset.Set, opts Options) (*Guarded, error) {
	if g == nil || set == nil {
		return nil, errors.New("tgadk: New needs a guard and its tool set")
	}
	if opts.Principal == nil {
		return nil, errors.New("tgadk: Options.Principal is required: the principal comes from the host, never from the model")
	}
	a := &Guarded{g: g, set: set, opts: opts}
	ho := opts.Options
	if ho.Provider == "" {
		ho.Provider, ho.APIFamily, ho.AdapterRevision = provider, apiFamily, adapterRevision
	}
	ho.Principal = a.principal
	if ho.Scope == nil {
		ho.Scope = SessionScope
	}
	if ho.Denials == nil {
		ho.Denials = sessionDenials{}
	}
	h, err := host.New(g, set, ho)
	if err != nil {
		return nil, fmt.Errorf("tgadk: %w", err)
	}
	a.h = h
	for _, d := range set.Tools() {
		a.tools = append(a.tools, &adkTool{a: a, d: d})
	}
	if st := h.StatusTool(); st != nil {
		a.status = st.Name()
		a.tools = append(a.tools, &statusTool{a: a, d: st})
	}
	return a, nil
}

// Tools returns the ADK tools, in the set's order, the status tool last:
// for llmagent.Config.Tools.
func (a *Guarded) Tools() []tool.Tool { return append([]tool.Tool(nil), a.tools...) }

// Toolset returns the same tools as an ADK toolset named name, for
// llmagent.Config.Toolsets.
func (a *Guarded) Toolset(name string) tool.Toolset {
	return &guardedToolset{name: name, tools: a.Tools()}
}

// Toolsets returns the imported toolsets of Options.Toolsets as ADK
// toolsets whose tools dispatch through the guard, for
// llmagent.Config.Toolsets.
func (a *Guarded) Toolsets() []tool.Toolset {
	out := make([]tool.Toolset, 0, len(a.opts.Toolsets))
	for _, ts := range a.opts.Toolsets {
		out = append(out, &adkToolset{a: a, ts: ts})
	}
	return out
}

type guardedToolset struct {
	name  string
	tools []tool.Tool
}

// Name implements tool.Toolset.
func (s *guardedToolset) Name() string { return s.name }

// Tools implements tool.Toolset: the guarded tools.
func (s *guardedToolset) Tools(agent.ReadonlyContext) ([]tool.Tool, error) {
	return append([]tool.Tool(nil), s.tools...), nil
}

// Plugin returns an ADK plugin, for runner.Config.PluginConfig, whose
// OnToolErrorCallback is OnToolError: calls of tools the agent does not
// have are answered by the guard (UNKNOWN_TOOL) for every agent the runner
// runs.
func (a *Guarded) Plugin() (*plugin.Plugin, error) {
	cfg := plugin.Config{Name: "toolguard", OnToolErrorCallback: a.OnToolError}
	if a.opts.AllowUnguarded != nil {
		cfg.BeforeToolCallback = a.BeforeTool
	}
	return plugin.New(cfg)
}

// BeforeTool is an llmagent.BeforeToolCallback that refuses unguarded
// tools: a tool that does not dispatch through a guard runs only when
// Options.AllowUnguarded allows it, and is otherwise answered
// UNKNOWN_TOOL without running. Guarded tools pass (nil, nil) and run.
// Plugin installs it when AllowUnguarded is set.
func (a *Guarded) BeforeTool(ctx agent.Context, t tool.Tool, args map[string]any) (map[string]any, error) {
	switch t.(type) {
	case *adkTool, *statusTool:
		return nil, nil
	}
	allowed := false
	if a.opts.AllowUnguarded != nil && t != nil {
		if err := safely(func() error { allowed = a.opts.AllowUnguarded(t); return nil }); err != nil {
			allowed = false
		}
	}
	if allowed {
		return nil, nil
	}
	return host.Map(&guard.Result{Code: guard.CodeUnknownTool, Delivery: guard.DeliveryFresh,
		Message: guard.CodeUnknownTool.DefaultMessage()}), nil
}

var _ llmagent.BeforeToolCallback = (*Guarded)(nil).BeforeTool

// OnToolError is an llmagent.OnToolErrorCallback. ADK calls it, with a
// stand-in tool that has no declaration, for a function call naming a tool
// the agent does not have, and OnToolError answers it UNKNOWN_TOOL as the
// function response: through the guard, which audits it, when the guard
// knows no such tool either; without a dispatch when the guard has a tool
// of that name that this agent was not given (another agent's, or one the
// host left out), so that it never runs. Errors of real tools are left as
// they are (nil, nil): the guarded tools answer with model results, not
// errors.
func (a *Guarded) OnToolError(ctx agent.Context, t tool.Tool, args map[string]any, err error) (map[string]any, error) {
	if t == nil {
		return nil, nil
	}
	if _, declared := t.(interface {
		Declaration() *genai.FunctionDeclaration
	}); declared {
		return nil, nil
	}
	if a.g.Tools().Lookup(t.Name()) != nil || t.Name() == a.status {
		return host.Map(&guard.Result{Code: guard.CodeUnknownTool, Delivery: guard.DeliveryFresh,
			Message: guard.CodeUnknownTool.DefaultMessage()}), nil
	}
	return a.dispatch(ctx, t.Name(), args)
}

var _ llmagent.OnToolErrorCallback = (*Guarded)(nil).OnToolError

// SessionScope is the default scope: the ADK session (app name, user id
// and session id), so that a write repeated anywhere in the session, by a
// retried run or a resumed one, is one operation. Ids too long for a
// scope are replaced by their digest. ctx is the ADK context the host
// step passes (an agent.Context); any other context has no scope ("").
func SessionScope(ctx context.Context) string {
	actx, ok := ctx.(agent.Context)
	if !ok {
		return ""
	}
	s := fmt.Sprintf("adk:%d:%s:%d:%s:%s", len(actx.AppName()), actx.AppName(), len(actx.UserID()), actx.UserID(), actx.SessionID())
	if len(s) > guard.MaxIDBytes {
		sum := sha256.Sum256([]byte(s))
		return "adk:sha256:" + hex.EncodeToString(sum[:])
	}
	return guard.SafeID(s)
}

// InvocationScope is a scope for Options.Scope: the ADK invocation, so
// that only a retry within one invocation (a confirmation's resume keeps
// its invocation id) replays, and the same intent in a later user turn of
// the session is another operation. ctx is the ADK context, as for
// SessionScope.
func InvocationScope(ctx context.Context) string {
	actx, ok := ctx.(agent.Context)
	if !ok {
		return ""
	}
	return guard.SafeID("adk-invocation:" + actx.InvocationID())
}

// call builds the guard call of a function call (host.Host.Call): the
// principal and scope from the host's functions of the ADK context, the
// invocation and function call ids. A principal the host did not give is
// host.ErrNoPrincipal, and a host function's panic host.ErrHostPanic, with nothing of
// the host's reason in the text ADK shows the model.
func (a *Guarded) call(ctx agent.Context, name string, args map[string]any) (guard.Call, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return guard.Call{}, fmt.Errorf("tgadk: the function call's arguments are not JSON: %w", err)
	}
	call, err := a.h.Call(ctx, host.Frame{Name: name, Arguments: raw, CallID: ctx.FunctionCallID(), ResponseID: ctx.InvocationID()})
	switch {
	case errors.Is(err, host.ErrNoPrincipal):
		return guard.Call{}, host.ErrNoPrincipal
	case errors.Is(err, host.ErrHostPanic):
		return guard.Call{}, host.ErrHostPanic
	}
	return call, err
}

// principal is Options.Principal for the host step: an error, a panic or
// a principal guard.Principal.Validate refuses is host.ErrNoPrincipal (the
// host's reason stays with the host: ADK shows a tool's error to the
// model).
func (a *Guarded) principal(ctx context.Context) (guard.Principal, error) {
	var p guard.Principal
	err := safely(func() (err error) { p, err = a.opts.Principal(ctx); return err })
	if err != nil || p.Validate() != nil {
		return guard.Principal{}, host.ErrNoPrincipal
	}
	return p, nil
}

// dispatch runs one function call through the host step, with ADK's
// confirmation flow around APPROVAL_REQUIRED, and returns the function
// response: a call ADK runs again with the human's answer is decided
// (host.Host.Decide); any other is answered (host.Host.Answer), and a
// write that waits for a human asks ADK for a confirmation.
func (a *Guarded) dispatch(ctx agent.Context, name string, args map[string]any) (map[string]any, error) {
	call, err := a.call(ctx, name, args)
	if err != nil {
		return nil, err
	}
	if c := ctx.ToolConfirmation(); c != nil && call.Approval == "" && a.opts.Signer != nil {
		ar := host.NewApprovalRequest(a.g, call)
		if !payloadMatches(c.Payload, ar.Fingerprint) {
			// The answer is to another question than this call's: no
			// decision on this one, which may be asked again.
			return a.otherAnswer(ctx, call)
		}
		d, err := a.decide(ctx, c, payload(ar))
		if err != nil {
			return nil, err
		}
		res, err := a.h.Decide(withAgent(ctx), call, host.PendingOf(ar), d)
		if err != nil {
			return nil, fmt.Errorf("tgadk: %w", err)
		}
		return host.Map(res), nil
	}
	ans, err := a.h.Answer(withAgent(ctx), call)
	if err != nil {
		return nil, fmt.Errorf("tgadk: %w", err)
	}
	if ans.Ask != nil {
		return a.ask(ctx, call, payload(*ans.Ask))
	}
	return host.Map(ans.Result), nil
}

// otherAnswer answers a call whose confirmation was for another intent.
// The call is dispatched without a grant, so nothing can run: an
// operation that ran already replays its outcome; otherwise the model is
// told OtherAnswerMessage, and the intent may be asked again.
func (a *Guarded) otherAnswer(ctx agent.Context, call guard.Call) (map[string]any, error) {
	res, err := a.g.Dispatch(withAgent(ctx), call)
	if err != nil {
		return nil, fmt.Errorf("tgadk: %w", err)
	}
	if res.Code == guard.CodeApprovalRequired {
		res = &guard.Result{Code: guard.CodeApprovalRequired, Delivery: guard.DeliveryFresh, Message: OtherAnswerMessage}
	}
	return host.Map(res), nil
}

// decide is the host's decision on a confirmation answer (Options.Decide),
// approved by the answering user unless the host names another.
func (a *Guarded) decide(ctx agent.Context, c *toolconfirmation.ToolConfirmation, req ConfirmationPayload) (host.Decision, error) {
	d := host.Decision{Approved: c.Confirmed}
	if a.opts.Decide != nil {
		if err := safely(func() error { d = a.opts.Decide(ctx, c, req); return nil }); err != nil {
			return host.Decision{}, err
		}
	}
	if d.Approver == "" {
		d.Approver = ctx.UserID()
	}
	return d, nil
}

// safely runs a host function, turning a panic into host.ErrHostPanic.
func safely(f func() error) error { return host.Safely(f) }

// agentKey keys the ADK context in the context a dispatch runs under, for
// Import's tools.
type agentKey struct{}

// withAgent returns ctx carrying itself, so that an imported ADK tool
// the guard executes gets the ADK context back (interceptors may wrap the
// context on the way).
func withAgent(ctx agent.Context) context.Context {
	return context.WithValue(ctx, agentKey{}, ctx)
}

// agentFrom returns the ADK context a dispatch runs under, or nil.
func agentFrom(ctx context.Context) agent.Context {
	actx, _ := ctx.Value(agentKey{}).(agent.Context)
	return actx
}
