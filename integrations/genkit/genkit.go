package tggenkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// Guarded is a guard.Guard as a Genkit middleware (ai.Middleware, for
// ai.WithUse): its hooks offer the model the guard's tools and send every
// tool call of the generation through the guard. It is safe for
// concurrent use; each generation gets hooks of its own.
type Guarded struct {
	h       *host.Host
	offered []*ai.ToolAction[any, any] // the set's toolset tools and the status tool, as Genkit declares them
	genkit  []string                   // the set's imported Genkit tools, by name
}

var _ ai.Middleware = (*Guarded)(nil)

// New returns the middleware that runs a generation's tool calls through
// g, whose tools are set: tools declared with package toolset, which the
// middleware offers the model itself, and Genkit tools imported with
// Import, which the generation is given as usual (ai.WithTools). Every
// tool of set must be the one g looks up by its name. The zero value of
// every field of opts (host.Options, the options of the host step every
// integration takes) means its default: Principal reads
// host.WithPrincipal's principal (in a flow, take it from the action
// context its context provider made), Scope host.WithScope's scope (the
// host's session, conversation or flow run id: Genkit's tool request refs
// may be absent or change when a generation is retried); provider,
// apiFamily and adapterRevision default to this package's names. Without
// an Approver a write that waits for a human interrupts the generation (a
// tool interrupt; see Approvals and Resume).
func New(g *guard.Guard, set *toolset.Set, opts host.Options) (*Guarded, error) {
	if opts.Provider == "" {
		opts.Provider, opts.APIFamily, opts.AdapterRevision = provider, apiFamily, adapterRevision
	}
	h, err := host.New(g, set, opts)
	if err != nil {
		return nil, fmt.Errorf("tggenkit: %w", err)
	}
	a := &Guarded{h: h}
	for _, d := range h.Tools() {
		if _, imported := d.(*Tool); imported {
			a.genkit = append(a.genkit, d.Name()) // a Genkit tool: the generation names it itself
			continue
		}
		a.offered = append(a.offered, declare(d))
	}
	return a, nil
}

// Name implements ai.Middleware: middlewareName.
func (a *Guarded) Name() string { return middlewareName }

// New implements ai.Middleware: the hooks of one generation. Tools are
// the set's toolset tools and the status tool, declared with the schemas
// their arguments are validated against; WrapTool answers every tool call
// through the guard; WrapModel lets a call of a tool the generation does
// not have reach WrapTool too (the guard answers UNKNOWN_TOOL, or runs a
// Genkit tool it imported that the generation was not given) instead of
// failing the generation.
func (a *Guarded) New(context.Context) (*ai.Hooks, error) {
	gen := &generation{a: a}
	tools := make([]ai.Tool, 0, len(a.offered))
	for _, t := range a.offered {
		tools = append(tools, &offeredTool{ToolAction: t, gen: gen})
	}
	return &ai.Hooks{Tools: tools, WrapTool: gen.wrapTool, WrapModel: gen.wrapModel}, nil
}

// generation is the state the hooks of one generation share: the
// registry Genkit registered the offered tools in, where stand-ins for
// unknown tools go.
type generation struct {
	a        *Guarded
	mu       sync.Mutex
	registry api.Registry
	standIns map[string]bool // names wrapModel registered a stand-in for
}

// setRegistry records the generation's registry, when Genkit registers
// the first offered tool in it; there an imported Genkit tool the
// generation was not given (ai.WithTools) gets a stand-in, so that its
// calls, and their restarts on a resume, reach WrapTool, which runs the
// tool directly.
func (gen *generation) setRegistry(r api.Registry) {
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if gen.registry != nil {
		return
	}
	gen.registry = r
	for _, name := range gen.a.genkit {
		if ai.LookupTool(r, name) == nil {
			gen.registerStandIn(name)
		}
	}
}

// registerStandIn registers a stand-in for a tool name Genkit has no tool
// for, in the generation's registry. gen.mu is held.
func (gen *generation) registerStandIn(name string) {
	registerUnknown(gen.registry, name)
	if gen.standIns == nil {
		gen.standIns = map[string]bool{}
	}
	gen.standIns[name] = true
}

// wrapModel lets Genkit find a tool for every tool request of the model's
// reply: a name the generation has no tool for gets a stand-in, in the
// generation's own registry, that only WrapTool runs (the guard answers
// UNKNOWN_TOOL, audited like every call).
func (gen *generation) wrapModel(ctx context.Context, params *ai.ModelParams, next ai.ModelNext) (*ai.ModelResponse, error) {
	resp, err := next(ctx, params)
	if err != nil || resp == nil || resp.Message == nil {
		return resp, err
	}
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if gen.registry == nil {
		return resp, nil
	}
	for _, p := range resp.Message.Content {
		if p == nil || !p.IsToolRequest() {
			continue
		}
		if p.ToolRequest.Name == "" {
			// Genkit finds no tool by an empty name, whatever is
			// registered, and fails the generation: the request goes on
			// under unnamedTool, which WrapTool dispatches as "".
			p.ToolRequest.Name = unnamedTool
		}
		if name := p.ToolRequest.Name; ai.LookupTool(gen.registry, name) == nil {
			gen.registerStandIn(name)
		}
	}
	return resp, nil
}

// unnamedTool is the name a tool request with an empty name goes under in
// the generation (Genkit can run no tool named ""): WrapTool dispatches it
// with its name empty again, so the guard answers UNKNOWN_TOOL and audits
// the call as the model made it (contract section 1). The history the
// model sees next names the request and its response so. No toolset tool
// can have this name (toolset names hold no dot).
const unnamedTool = "toolguard.unnamed"

// wrapTool answers one tool call through the guard: a status query for
// the status tool, else a dispatch, with the approval interrupt and
// resume around it. A Genkit tool the guard lets through runs through
// next. The response's Output is the model result; an error is the
// host's (no principal, a programming error the guard reported, a resume
// for another call) and fails the generation; no panic leaves it.
func (gen *generation) wrapTool(ctx context.Context, params *ai.ToolParams, next ai.ToolNext) (resp *ai.MultipartToolResponse, err error) {
	name := ""
	if params != nil && params.Request != nil {
		name = params.Request.Name
	}
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, fmt.Errorf("tggenkit: tool call %q: panic: %v", name, r)
		}
	}()
	if params == nil || params.Request == nil {
		return nil, errors.New("tggenkit: a tool call without a request")
	}
	if gen.standIn(name) {
		// Genkit has no tool of this name; a Genkit tool the guard
		// imported runs directly (Tool.Execute), not as the stand-in.
		next = nil
		if name == unnamedTool {
			req := *params.Request
			req.Name = ""
			params = &ai.ToolParams{Request: &req, Tool: params.Tool}
		}
	}
	res, err := gen.a.answer(ctx, params, next)
	if err != nil {
		return nil, err
	}
	return &ai.MultipartToolResponse{Output: host.Map(res)}, nil
}

// standIn reports whether the generation's tool of that name is a
// stand-in wrapModel registered.
func (gen *generation) standIn(name string) bool {
	gen.mu.Lock()
	defer gen.mu.Unlock()
	return gen.standIns[name]
}

// answer is the model result of one tool call, or the interrupt that
// pauses the generation for a human, or a host error.
func (a *Guarded) answer(ctx context.Context, params *ai.ToolParams, next ai.ToolNext) (*guard.Result, error) {
	req := params.Request
	args, err := arguments(req.Input)
	if err != nil {
		return nil, fmt.Errorf("tggenkit: tool call %q: %w", req.Name, err)
	}
	call, err := a.h.Call(ctx, host.Frame{Name: req.Name, Arguments: args, CallID: req.Ref})
	if err != nil {
		return nil, fmt.Errorf("tggenkit: %w", err)
	}
	if next != nil {
		ctx = context.WithValue(ctx, endpointKey{}, &endpoint{params: params, next: next})
	}
	if res, err := a.resume(ctx, call); err != nil || res != nil {
		return res, err
	}
	ans, err := a.h.Answer(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("tggenkit: %w", err)
	}
	if ans.Ask != nil {
		return nil, ai.NewToolInterruptError(interruptMetadata(*ans.Ask))
	}
	return ans.Result, nil
}

// arguments is a tool request's input as JSON; a request without one has
// no arguments, an empty object.
func arguments(input any) (json.RawMessage, error) {
	if input == nil {
		return json.RawMessage(`{}`), nil
	}
	if raw, ok := input.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("the input is not JSON: %w", err)
	}
	return b, nil
}
