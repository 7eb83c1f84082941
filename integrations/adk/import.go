package tgadk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// ImportOptions configure Import.
type ImportOptions struct {
	// Authorize decides whether inv.Principal may make this call of the
	// ADK tool named tool; it returns guard.ErrNotFound when not (any
	// error fails closed as NOT_FOUND). It is required: an ADK tool knows
	// nothing of the guard's principals.
	Authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	// Read marks the tool as having no side effects. By default an
	// imported tool is a write: it runs at most once per operation.
	Read bool
	// NoApproval lets a write run without a human's approval. By
	// default every write needs one.
	NoApproval bool
	// Repeatable marks a write whose identical repeats are meant
	// (guard.ToolSpec.Repeatable).
	Repeatable bool
	// LoggedArguments names top-level argument members safe to copy
	// into the audit record.
	LoggedArguments []string
	// Receipt asks the downstream system for the result of the operation
	// with inv.IdempotencyKey, to settle an unknown outcome (see
	// guard.Tool.LookupReceipt). Nil: outcomes stay unknown until an
	// operator settles them.
	Receipt func(ctx context.Context, inv *guard.Invocation) (out json.RawMessage, found bool, err error)
}

// Tool is an ADK tool (a functiontool, a tool an mcptoolset listed, any
// tool with a declaration and a Run) behind the guard. It implements
// toolset.Declared, so it joins a toolset.Set beside typed tools, and New
// offers it to the model with its own declaration. Its Schema is the
// declaration's JSON schema compiled (toolset.CompileSchema), not Strict:
// absent members stay absent.
type Tool struct {
	inner     runnable
	decl      *genai.FunctionDeclaration
	schema    *toolset.Schema
	spec      guard.ToolSpec
	authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	receipt   func(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error)
}

var _ toolset.Declared = (*Tool)(nil)

// runnable is what ADK runs of a function tool.
type runnable interface {
	tool.Tool
	Declaration() *genai.FunctionDeclaration
	Run(ctx agent.Context, args any) (map[string]any, error)
}

// Import puts an ADK tool behind the guard. Its declaration's JSON schema
// (ParametersJsonSchema, as functiontool and mcptoolset declare) is
// compiled once and validates the arguments before the tool runs; a
// declaration without one takes no arguments but an object. Import fails
// for a tool ADK cannot run as a function (no declaration or Run), a
// long-running tool, and a schema that does not compile. Declare the ADK
// tool without ADK's own confirmation (RequireConfirmation): the guard
// asks for approval.
func Import(t tool.Tool, opts ImportOptions) (*Tool, error) {
	if opts.Authorize == nil {
		return nil, errors.New("tgadk: Import needs ImportOptions.Authorize")
	}
	r, ok := t.(runnable)
	if !ok || t == nil {
		return nil, fmt.Errorf("tgadk: tool %T is not a function tool (no Declaration and Run)", t)
	}
	if r.IsLongRunning() {
		return nil, fmt.Errorf("tgadk: tool %q is long-running: its result comes later, outside the guard", r.Name())
	}
	decl := r.Declaration()
	if decl == nil {
		return nil, fmt.Errorf("tgadk: tool %q has no declaration", r.Name())
	}
	if decl.Parameters != nil && decl.ParametersJsonSchema == nil {
		return nil, fmt.Errorf("tgadk: tool %q declares genai Parameters; declare its schema as ParametersJsonSchema", r.Name())
	}
	raw := json.RawMessage(`{"type":"object"}`)
	if decl.ParametersJsonSchema != nil {
		b, err := json.Marshal(decl.ParametersJsonSchema)
		if err != nil {
			return nil, fmt.Errorf("tgadk: tool %q schema: %w", r.Name(), err)
		}
		raw = b
	}
	schema, err := toolset.CompileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("tgadk: tool %q schema: %w", r.Name(), err)
	}
	d := *decl
	it := &Tool{inner: r, decl: &d, schema: schema, authorize: opts.Authorize, receipt: opts.Receipt,
		spec: guard.ToolSpec{Name: r.Name(), Effect: guard.Write, LoggedArguments: append([]string(nil), opts.LoggedArguments...)}}
	if opts.Read {
		it.spec.Effect = guard.Read
	}
	it.spec.NeedsApproval = it.spec.Effect == guard.Write && !opts.NoApproval
	it.spec.Repeatable = it.spec.Effect == guard.Write && opts.Repeatable
	return it, nil
}

// Spec implements guard.Tool.
func (t *Tool) Spec() *guard.ToolSpec { return &t.spec }

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Description returns the ADK tool's description.
func (t *Tool) Description() string { return t.inner.Description() }

// Schema returns the declaration's schema compiled, the one the arguments
// are validated against.
func (t *Tool) Schema() *toolset.Schema { return t.schema }

// Decode implements guard.Tool: the arguments must be an object the
// schema accepts; the input is their canonical JSON.
func (t *Tool) Decode(canonical []byte, parsed any) (any, error) {
	if _, ok := parsed.(map[string]any); !ok {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments must be a JSON object.")
	}
	if err := t.schema.Validate(parsed); err != nil {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments do not match the tool's schema.")
	}
	return json.RawMessage(canonical), nil
}

// AuthorizeCall implements guard.Tool with the host's Authorize.
func (t *Tool) AuthorizeCall(ctx context.Context, inv *guard.Invocation) error {
	return t.authorize(ctx, t.spec.Name, inv)
}

// Execute implements guard.Tool: the ADK tool's Run, under the ADK context
// of the call (carrying the invocation: InvocationFrom), with the
// canonical arguments. An error that says the tool did not start
// (ADK's confirmation errors, guard.NotStarted) is TIMEOUT_BEFORE_EXECUTE;
// typed guard errors keep their codes; any other error of a write is
// OUTCOME_UNKNOWN, of a read UNAVAILABLE.
func (t *Tool) Execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	actx := agentFrom(ctx)
	if actx == nil {
		return nil, guard.NotStarted(errors.New("tgadk: an imported ADK tool runs only within an ADK tool call"))
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(inv.Arguments))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, guard.NotStarted(fmt.Errorf("tgadk: arguments: %w", err))
	}
	out, err := t.run(&toolContext{Context: actx, ctx: context.WithValue(ctx, invocationKey{}, inv)}, args)
	if err != nil {
		if errors.Is(err, tool.ErrConfirmationRequired) || errors.Is(err, tool.ErrConfirmationRejected) {
			return nil, guard.NotStarted(err)
		}
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, guard.UnknownOutcome(fmt.Errorf("tgadk: tool %q output: %w", t.spec.Name, err))
	}
	return b, nil
}

func (t *Tool) run(actx agent.Context, args map[string]any) (out map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tgadk: tool %q panicked: %v", t.spec.Name, r)
		}
	}()
	return t.inner.Run(actx, args)
}

// errNoReceipt is the inconclusive answer of an imported tool without a
// Receipt hook.
var errNoReceipt = errors.New("tgadk: the imported tool has no receipt lookup")

// LookupReceipt implements guard.Tool with the Receipt hook; without one
// it is inconclusive.
func (t *Tool) LookupReceipt(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
	if t.receipt == nil {
		return nil, false, errNoReceipt
	}
	return t.receipt(ctx, inv)
}

// toolContext is the ADK context of a call as an imported tool runs it:
// ADK's, with the values, deadline and cancellation of the guard's
// context, which carries the invocation. (ADK's tool context does not
// support WithAgentContext.)
type toolContext struct {
	agent.Context
	ctx context.Context
}

// Value, Done, Err and Deadline are the guard context's.
func (c *toolContext) Value(key any) any                       { return c.ctx.Value(key) }
func (c *toolContext) Done() <-chan struct{}                   { return c.ctx.Done() }
func (c *toolContext) Err() error                              { return c.ctx.Err() }
func (c *toolContext) Deadline() (deadline time.Time, ok bool) { return c.ctx.Deadline() }

// invocationKey keys the guard's invocation in an imported tool's context.
type invocationKey struct{}

// InvocationFrom returns the guard's invocation of the call an imported
// ADK tool is running for (its principal, its downstream idempotency key
// inv.IdempotencyKey, its grant), or nil outside one. A functiontool
// handler calls it with its agent.Context.
func InvocationFrom(ctx context.Context) *guard.Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*guard.Invocation)
	return inv
}
