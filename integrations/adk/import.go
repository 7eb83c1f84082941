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
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// Tool is an ADK tool (a functiontool, a tool an mcptoolset listed, any
// tool with a declaration and a Run) behind the guard (host.Imported:
// Spec, Name, Description, Schema, Decode, AuthorizeCall, Execute and
// LookupReceipt). It implements toolset.Declared, so it joins a
// toolset.Set beside typed tools, and New offers it to the model with its
// own declaration. Its Schema is the declaration's JSON schema compiled
// (toolset.CompileSchema), not Strict: absent members stay absent.
type Tool struct {
	*host.Imported
	inner runnable
	decl  *genai.FunctionDeclaration
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
func Import(t tool.Tool, opts host.ImportOptions) (*Tool, error) {
	if opts.Authorize == nil {
		return nil, errors.New("tgadk: Import needs host.ImportOptions.Authorize")
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
	var raw json.RawMessage
	if decl.ParametersJsonSchema != nil {
		b, err := json.Marshal(decl.ParametersJsonSchema)
		if err != nil {
			return nil, fmt.Errorf("tgadk: tool %q schema: %w", r.Name(), err)
		}
		raw = b
	}
	d := *decl
	it := &Tool{inner: r, decl: &d}
	var err error
	opts.Description, opts.Schema = r.Description(), raw
	if it.Imported, err = host.Import(r.Name(), it.execute, opts); err != nil {
		return nil, fmt.Errorf("tgadk: %w", err)
	}
	return it, nil
}

// execute runs the ADK tool's Run, under the ADK context of the call
// (carrying the invocation: host.InvocationFrom), with the canonical
// arguments. An error that says the tool did not start (ADK's
// confirmation errors, guard.NotStarted) is TIMEOUT_BEFORE_EXECUTE; typed
// guard errors keep their codes; any other error of a write is
// OUTCOME_UNKNOWN, of a read UNAVAILABLE.
func (t *Tool) execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
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
	out, err := t.run(&toolContext{Context: actx, ctx: ctx}, args)
	if err != nil {
		if errors.Is(err, tool.ErrConfirmationRequired) || errors.Is(err, tool.ErrConfirmationRejected) {
			return nil, guard.NotStarted(err)
		}
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, guard.UnknownOutcome(fmt.Errorf("tgadk: tool %q output: %w", t.Name(), err))
	}
	return b, nil
}

func (t *Tool) run(actx agent.Context, args map[string]any) (out map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tgadk: tool %q panicked: %v", t.Name(), r)
		}
	}()
	return t.inner.Run(actx, args)
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
