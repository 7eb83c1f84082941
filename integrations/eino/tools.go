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
	"github.com/toolguard/toolguard/host"
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

// Tool is one of Eino's own tools behind the guard (Import): its JSON
// Schema, from its Info, is compiled once and validates the model's
// arguments before the tool runs, as adapters/mcp does for a remote MCP
// tool (host.Imported: Spec, Name, Description, Schema, Decode,
// AuthorizeCall, Execute and LookupReceipt). It implements
// toolset.Declared, so it joins a toolset.Set next to toolset tools;
// Guarded.Tools offers the Eino tool itself, and the middleware runs it
// through Eino's own endpoint (its callbacks and inner middlewares) once
// the guard let the call through.
type Tool struct {
	*host.Imported
	eino tool.BaseTool
}

var _ toolset.Declared = (*Tool)(nil)

// Import puts an Eino tool (a tool.InvokableTool or tool.StreamableTool)
// behind the guard. Its Info's parameters are its schema (no parameters:
// any JSON object), not Strict: the model is given it as Eino gives it.
// It fails without host.ImportOptions.Authorize, when the tool is neither
// invokable nor streamable, its Info fails or its schema does not
// compile; toolset.New refuses a name model providers do not accept.
func Import(ctx context.Context, t tool.BaseTool, opts host.ImportOptions) (*Tool, error) {
	if opts.Authorize == nil {
		return nil, errors.New("tgeino: Import needs host.ImportOptions.Authorize")
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
	var raw json.RawMessage
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
	it := &Tool{eino: t}
	opts.Description, opts.Schema = info.Desc, raw
	if it.Imported, err = host.Import(info.Name, it.execute, opts); err != nil {
		return nil, fmt.Errorf("tgeino: %w", err)
	}
	return it, nil
}

// Eino returns the wrapped Eino tool.
func (t *Tool) Eino() tool.BaseTool { return t.eino }

// execute runs the Eino tool with the canonical arguments, through Eino's
// endpoint when the middleware dispatched the call, directly otherwise.
// The context carries the invocation (host.InvocationFrom), whose
// IdempotencyKey is the key to hand the downstream system. The output is
// the tool's text: as is when it is JSON, else as a JSON string. An error
// is the tool's failure: for a write, an unknown outcome, unless it is a
// guard error that says otherwise (guard.NotStarted, guard.ErrNotFound,
// …).
func (t *Tool) execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	var (
		out string
		err error
	)
	if ex, ok := ctx.Value(endpointKey{}).(*endpoint); ok && ex.name == t.Name() {
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
