package tggenkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// errNotGuarded is what a tool the middleware offers answers when Genkit
// runs it without the middleware's WrapTool: nothing runs unguarded.
var errNotGuarded = errors.New("tggenkit: the tool ran without the toolguard middleware (ai.WithUse); nothing was executed")

// declare is a toolset tool as Genkit declares it to the model: its name,
// description and the very schema its arguments are validated against,
// marked strict when the schema is (providers with a strict mode, such as
// Genkit's OpenAI and Anthropic plugins, then hold the model to it). Its
// function never runs: WrapTool answers every call of it through the
// guard.
func declare(d toolset.Declared) *ai.ToolAction[any, any] {
	opts := []ai.ToolOption{ai.WithInputSchema(d.Schema().Map())}
	if d.Schema().Strict() {
		opts = append(opts, ai.WithStrictSchema(true))
	}
	return ai.NewTool(d.Name(), d.Description(), func(*ai.ToolContext, any) (any, error) {
		return nil, errNotGuarded
	}, opts...)
}

// offeredTool is an offered tool as one generation's hooks give it to
// Genkit: registering it in the generation's registry records that
// registry for the generation (where stand-ins for unknown tools go).
// It registers the shared tool action without changing it, so concurrent
// generations share it safely.
type offeredTool struct {
	*ai.ToolAction[any, any]
	gen *generation
}

// Register implements ai.Tool: the tool's action under its tool key in r,
// the generation's registry.
func (t *offeredTool) Register(r api.Registry) {
	t.gen.setRegistry(r)
	provider, id := api.ParseName(t.Name())
	key := api.NewKey(api.ActionTypeToolV2, provider, id)
	defer func() { _ = recover() }() // a name the registry has already: the generation's lookups find that one, which WrapTool guards too
	if r.LookupAction(key) == nil {
		r.RegisterAction(key, t.ToolAction)
	}
}

// registerUnknown registers, in a generation's registry, a stand-in for a
// tool the model named but the generation does not have, so that Genkit
// runs the call through WrapTool, where the guard answers UNKNOWN_TOOL,
// instead of failing the generation. The stand-in itself never runs.
func registerUnknown(r api.Registry, name string) {
	defer func() { _ = recover() }() // a name Genkit cannot hold: Genkit fails the generation, as without the guard
	ai.NewTool(name, "", func(*ai.ToolContext, any) (any, error) {
		return nil, errNotGuarded
	}, ai.WithInputSchema(map[string]any{"type": "object"})).Register(r)
}

// Tool is one of Genkit's own tools (genkit.DefineTool, ai.NewTool, any
// ai.Tool) behind the guard: its input schema, from its Definition, is
// compiled once and validates the model's arguments before the tool runs,
// as adapters/mcp does for a remote MCP tool (host.Imported: Spec, Name,
// Description, Schema, Decode, AuthorizeCall, Execute and LookupReceipt).
// It implements toolset.Declared, so it joins a toolset.Set next to
// toolset tools. The generation is given the Genkit tool itself
// (ai.WithTools), as Genkit declares it; the middleware runs it through
// Genkit's own tool runner once the guard let the call through.
type Tool struct {
	*host.Imported
	inner ai.Tool
}

var _ toolset.Declared = (*Tool)(nil)

// Import puts a Genkit tool behind the guard. Its Definition's input
// schema is its schema (none: any JSON object), not Strict: the model is
// given it as Genkit gives it. Import fails without an Authorize, for a
// tool without a definition, and for a schema that does not compile;
// toolset.New refuses a name model providers do not accept. Declare the
// Genkit tool without interrupts of its own: the guard asks for approval.
func Import(t ai.Tool, opts host.ImportOptions) (*Tool, error) {
	if opts.Authorize == nil {
		return nil, errors.New("tggenkit: Import needs host.ImportOptions.Authorize")
	}
	if t == nil {
		return nil, errors.New("tggenkit: Import needs a tool")
	}
	var def *ai.ToolDefinition
	if err := host.Safely(func() error { def = t.Definition(); return nil }); err != nil || def == nil {
		return nil, fmt.Errorf("tggenkit: tool %q has no definition", t.Name())
	}
	var raw json.RawMessage
	if len(def.InputSchema) > 0 {
		b, err := json.Marshal(def.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tggenkit: tool %q schema: %w", def.Name, err)
		}
		raw = b
	}
	it := &Tool{inner: t}
	var err error
	opts.Description, opts.Schema = def.Description, raw
	if it.Imported, err = host.Import(t.Name(), it.execute, opts); err != nil {
		return nil, fmt.Errorf("tggenkit: %w", err)
	}
	return it, nil
}

// Genkit returns the imported Genkit tool, for ai.WithTools.
func (t *Tool) Genkit() ai.Tool { return t.inner }

// execute runs the Genkit tool with the canonical arguments, through
// Genkit's tool runner (the WrapTool hooks inside this one, then the
// tool's action) when the middleware dispatched the call, directly
// otherwise. The context carries the invocation (host.InvocationFrom), whose
// IdempotencyKey is the key to hand the downstream system. The output is
// the tool's output as JSON. An interrupt the tool raises means it did not
// do its work (Genkit re-runs an interrupted tool from the start): the
// call did not start. Any other error is the tool's failure: for a write,
// an unknown outcome, unless it is a guard error that says otherwise
// (guard.NotStarted, guard.ErrNotFound, …).
func (t *Tool) execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	var input any
	dec := json.NewDecoder(bytes.NewReader(inv.Arguments))
	dec.UseNumber()
	if err := dec.Decode(&input); err != nil {
		return nil, guard.NotStarted(fmt.Errorf("tggenkit: arguments: %w", err))
	}
	var (
		resp *ai.MultipartToolResponse
		err  error
	)
	if ep, ok := ctx.Value(endpointKey{}).(*endpoint); ok && ep.next != nil && ep.params.Tool != nil && ep.params.Request.Name == t.Name() {
		req := &ai.ToolRequest{Name: ep.params.Request.Name, Ref: ep.params.Request.Ref, Input: input}
		resp, err = ep.next(ctx, &ai.ToolParams{Request: req, Tool: ep.params.Tool})
	} else {
		resp, err = t.inner.RunRawMultipart(ctx, input)
	}
	if err != nil {
		if interrupted, _ := ai.IsToolInterruptError(err); interrupted {
			return nil, guard.NotStarted(fmt.Errorf("tggenkit: tool %q interrupted the generation; interrupts inside guarded tools are not supported", t.Name()))
		}
		return nil, err
	}
	if resp == nil {
		return json.RawMessage(`null`), nil
	}
	out, err := json.Marshal(resp.Output)
	if err != nil {
		return nil, guard.UnknownOutcome(fmt.Errorf("tggenkit: tool %q output: %w", t.Name(), err))
	}
	return out, nil
}

// endpointKey keys the Genkit tool runner of the call being dispatched, for
// Tool.Execute.
type endpointKey struct{}

// endpoint is the rest of Genkit's tool runner for the call WrapTool is
// answering.
type endpoint struct {
	params *ai.ToolParams
	next   ai.ToolNext
}
