package tgeino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// declaredTool offers a toolset tool to Eino: its Info is the tool's name,
// description and the very schema its arguments are validated against. It
// never runs by itself: Guarded's middleware answers every call of it through
// the guard, and a call that reaches it without the middleware fails.
type declaredTool struct {
	d    toolset.Declared
	info *schema.ToolInfo
}

var _ tool.InvokableTool = (*declaredTool)(nil)

// errNotGuarded is what a toolguard tool answers when Eino runs it without
// Guarded's middleware: nothing runs unguarded.
var errNotGuarded = errors.New("tgeino: the tool ran without the toolguard middleware (Guarded.ToolMiddleware or Guarded.ToolsNodeConfig); nothing was executed")

func newDeclaredTool(d toolset.Declared) (*declaredTool, error) {
	var js jsonschema.Schema
	if err := json.Unmarshal(d.Schema().JSON(), &js); err != nil {
		return nil, fmt.Errorf("tgeino: tool %q schema: %w", d.Name(), err)
	}
	return &declaredTool{d: d, info: &schema.ToolInfo{Name: d.Name(), Desc: d.Description(),
		ParamsOneOf: schema.NewParamsOneOfByJSONSchema(&js)}}, nil
}

// Info implements tool.BaseTool.
func (t *declaredTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun implements tool.InvokableTool: only the middleware answers
// the tool's calls.
func (t *declaredTool) InvokableRun(context.Context, string, ...tool.Option) (string, error) {
	return "", errNotGuarded
}

// ImportOptions configure Import. The zero value is the safe default for
// a tool the guard knows nothing of: a write that needs a human's approval.
type ImportOptions struct {
	// Authorize decides whether inv.Principal may make this call of the
	// Eino tool named tool; it returns guard.ErrNotFound when not (any
	// error fails closed as NOT_FOUND). It is required: an Eino tool knows
	// nothing of the guard's principals.
	Authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	// Read marks the tool as having no side effects. By default an
	// imported tool is a write: it runs at most once per operation, under a
	// reservation.
	Read bool
	// NoApproval lets a write run without a human's approval. By default
	// every write needs one (an interrupt of the run, see Guarded).
	NoApproval bool
	// Repeatable marks a write whose identical repeats are meant: each call
	// is its own operation (guard.ToolSpec.Repeatable).
	Repeatable bool
	// LoggedArguments names the top-level argument members safe to copy
	// into the audit record; the others are only fingerprinted.
	LoggedArguments []string
	// Receipt asks the downstream system whether the operation under
	// inv.IdempotencyKey happened, to settle an unknown outcome (see
	// guard.Tool.LookupReceipt). Nil: unknown outcomes stay unknown until
	// an operator settles them.
	Receipt func(ctx context.Context, inv *guard.Invocation) (out json.RawMessage, found bool, err error)
}

// Tool is one of Eino's own tools behind the guard (Import): its JSON Schema, from
// its Info, is compiled once (toolset.CompileSchema) and validates the
// model's arguments before the tool runs, as adapters/mcp does for a
// remote MCP tool. It implements toolset.Declared, so it joins a
// toolset.Set next to toolset tools; Guarded.Tools offers the Eino tool
// itself, and the middleware runs it through Eino's own endpoint (its
// callbacks and inner middlewares) once the guard let the call through.
type Tool struct {
	eino      tool.BaseTool
	info      *schema.ToolInfo
	schema    *toolset.Schema
	spec      guard.ToolSpec
	authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	receipt   func(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error)
}

var _ toolset.Declared = (*Tool)(nil)

// Import puts an Eino tool (a tool.InvokableTool or tool.StreamableTool)
// behind the guard. Its Info's parameters are its schema (no parameters:
// any JSON object), not Strict: the model is given it as Eino gives it.
// It fails without ImportOptions.Authorize, when the tool is neither
// invokable nor streamable, its Info fails or its schema does not
// compile; toolset.New refuses a name model providers do not accept.
func Import(ctx context.Context, t tool.BaseTool, opts ImportOptions) (*Tool, error) {
	if opts.Authorize == nil {
		return nil, errors.New("tgeino: Import needs ImportOptions.Authorize")
	}
	_, inv := t.(tool.InvokableTool)
	_, str := t.(tool.StreamableTool)
	if !inv && !str {
		return nil, fmt.Errorf("tgeino: %T is neither a tool.InvokableTool nor a tool.StreamableTool", t)
	}
	info, err := t.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("tgeino: tool info: %w", err)
	}
	raw := json.RawMessage(`{"type":"object"}`)
	if info.ParamsOneOf != nil {
		js, err := info.ParamsOneOf.ToJSONSchema()
		if err != nil {
			return nil, fmt.Errorf("tgeino: tool %q parameters: %w", info.Name, err)
		}
		if js != nil {
			if raw, err = json.Marshal(js); err != nil {
				return nil, fmt.Errorf("tgeino: tool %q parameters: %w", info.Name, err)
			}
		}
	}
	sch, err := toolset.CompileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("tgeino: tool %q: %w", info.Name, err)
	}
	write := !opts.Read
	effect := guard.Write
	if opts.Read {
		effect = guard.Read
	}
	return &Tool{eino: t, info: info, schema: sch, authorize: opts.Authorize, receipt: opts.Receipt,
		spec: guard.ToolSpec{Name: info.Name, Effect: effect, NeedsApproval: write && !opts.NoApproval,
			Repeatable: write && opts.Repeatable, LoggedArguments: append([]string(nil), opts.LoggedArguments...)}}, nil
}

// Spec implements guard.Tool: a write unless ImportOptions.Read, needing
// approval unless ImportOptions.NoApproval.
func (t *Tool) Spec() *guard.ToolSpec { return &t.spec }

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Description returns the tool's description, from its Info.
func (t *Tool) Description() string { return t.info.Desc }

// Schema returns the tool's parameters compiled, the schema its arguments
// are validated against; it is not Strict.
func (t *Tool) Schema() *toolset.Schema { return t.schema }

// Eino returns the wrapped Eino tool.
func (t *Tool) Eino() tool.BaseTool { return t.eino }

// Decode implements guard.Tool: the arguments must be a JSON object the
// tool's schema accepts; the input is their canonical JSON.
func (t *Tool) Decode(canonical []byte, parsed any) (any, error) {
	if _, ok := parsed.(map[string]any); !ok {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments must be a JSON object.")
	}
	if err := t.schema.Validate(parsed); err != nil {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments do not match the tool's schema.")
	}
	return json.RawMessage(canonical), nil
}

// AuthorizeCall implements guard.Tool with ImportOptions.Authorize.
func (t *Tool) AuthorizeCall(ctx context.Context, inv *guard.Invocation) error {
	return t.authorize(ctx, t.spec.Name, inv)
}

// Execute implements guard.Tool: the Eino tool runs with the canonical
// arguments, through Eino's endpoint when the middleware dispatched the
// call, directly otherwise. The context carries the invocation
// (InvocationFrom), whose IdempotencyKey is the key to hand the downstream
// system. The output is the tool's text: as is when it is JSON, else as a
// JSON string. An error is the tool's failure: for a
// write, an unknown outcome, unless it is a guard error that says
// otherwise (guard.NotStarted, guard.ErrNotFound, …).
func (t *Tool) Execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	ctx = context.WithValue(ctx, invocationKey{}, inv)
	var (
		out string
		err error
	)
	if ex, ok := ctx.Value(endpointKey{}).(*endpoint); ok && ex.name == t.spec.Name {
		out, err = ex.run(ctx, string(inv.Arguments))
	} else {
		out, err = runDirect(ctx, t.eino, string(inv.Arguments))
	}
	if err != nil {
		if _, ok := compose.IsInterruptRerunError(err); ok {
			return nil, guard.UnknownOutcome(errors.New("tgeino: a guarded tool interrupted the run; interrupts inside guarded tools are not supported"))
		}
		return nil, err
	}
	return textOutput(out), nil
}

// LookupReceipt implements guard.Tool with ImportOptions.Receipt; without
// one, every lookup is inconclusive.
func (t *Tool) LookupReceipt(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
	if t.receipt == nil {
		return nil, false, errors.New("tgeino: the tool has no receipt lookup")
	}
	return t.receipt(ctx, inv)
}

// runDirect runs an Eino tool without Eino's endpoint.
func runDirect(ctx context.Context, t tool.BaseTool, args string) (string, error) {
	if it, ok := t.(tool.InvokableTool); ok {
		return it.InvokableRun(ctx, args)
	}
	sr, err := t.(tool.StreamableTool).StreamableRun(ctx, args)
	if err != nil {
		return "", err
	}
	return concat(sr)
}

// concat reads a stream of text to its end.
func concat(sr *schema.StreamReader[string]) (string, error) {
	defer sr.Close()
	var b strings.Builder
	for {
		s, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
}

// textOutput is an Eino tool's text as the guard's JSON output: the text
// itself when it is JSON (Eino's utils.InferTool encodes every output so),
// else the text as a JSON string.
func textOutput(s string) json.RawMessage {
	if t := strings.TrimSpace(s); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s)
	return b
}

// ModelResult reads the content of a tool message the middleware answered
// (schema.Message.Content) back as the model result it carries; it fails
// for text that is not a tool-model-result-v2 object.
func ModelResult(content string) (*guard.Result, error) {
	var r guard.Result
	if err := json.Unmarshal([]byte(content), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

type invocationKey struct{}

// InvocationFrom returns the guard's invocation of the call a wrapped Eino
// tool runs for: its principal, its canonical arguments and, above all,
// IdempotencyKey, the key to hand the downstream system so that a retry
// the guard cannot see is deduplicated there. It is nil outside a guarded
// run of a Tool.
func InvocationFrom(ctx context.Context) *guard.Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*guard.Invocation)
	return inv
}
