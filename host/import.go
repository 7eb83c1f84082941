package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// ImportOptions configure Import. The zero value is the safe default for a
// tool the guard knows nothing of: a write that needs a human's approval.
type ImportOptions struct {
	// Description is the tool's description, offered to the model.
	Description string
	// Schema is the tool's parameters' JSON schema (nil: any JSON
	// object); it is not Strict, so absent members stay absent. The
	// framework modules' Import functions fill Description and Schema
	// from the framework's tool.
	Schema json.RawMessage
	// Authorize decides whether inv.Principal may make this call of the
	// tool named tool; it returns guard.ErrNotFound when not (any error
	// fails closed as NOT_FOUND). It is required: a framework's tool knows
	// nothing of the guard's principals.
	Authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	// Read marks the tool as having no side effects. By default an
	// imported tool is a write: it runs at most once per operation, under
	// a reservation.
	Read bool
	// NoApproval lets a write run without a human's approval. By default
	// every write needs one.
	NoApproval bool
	// Repeatable marks a write whose identical repeats are meant: each
	// call is its own operation (guard.ToolSpec.Repeatable).
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

// ExecFunc runs an imported tool with the call's invocation: its
// canonical arguments (inv.Arguments) and the downstream idempotency key
// (inv.IdempotencyKey). ctx carries inv (InvocationFrom).
type ExecFunc func(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error)

// Imported is a framework's own tool behind the guard: its JSON schema
// compiled once (toolset.CompileSchema), validating the model's arguments
// before the tool runs; authorized by the host; run by the framework's
// ExecFunc. It implements guard.Tool and toolset.Declared, so it joins a
// toolset.Set beside typed tools. A framework module embeds it in its own
// Tool type, which keeps the framework's tool.
type Imported struct {
	spec      guard.ToolSpec
	desc      string
	schema    *toolset.Schema
	exec      ExecFunc
	authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	receipt   func(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error)
}

var _ toolset.Declared = (*Imported)(nil)

// Import puts a framework's tool, named name, behind the guard, described
// by opts.Description and opts.Schema. It fails without
// ImportOptions.Authorize or exec, and for a schema that does not
// compile.
func Import(name string, exec ExecFunc, opts ImportOptions) (*Imported, error) {
	schema := opts.Schema
	if opts.Authorize == nil {
		return nil, errors.New("host: Import needs ImportOptions.Authorize")
	}
	if exec == nil {
		return nil, fmt.Errorf("host: tool %q has nothing to run", name)
	}
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	sch, err := toolset.CompileSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("host: tool %q schema: %w", name, err)
	}
	it := &Imported{desc: opts.Description, schema: sch, exec: exec, authorize: opts.Authorize, receipt: opts.Receipt,
		spec: guard.ToolSpec{Name: name, Effect: guard.Write, LoggedArguments: append([]string(nil), opts.LoggedArguments...)}}
	if opts.Read {
		it.spec.Effect = guard.Read
	}
	it.spec.NeedsApproval = it.spec.Effect == guard.Write && !opts.NoApproval
	it.spec.Repeatable = it.spec.Effect == guard.Write && opts.Repeatable
	return it, nil
}

// Spec implements guard.Tool: a write unless ImportOptions.Read, needing
// approval unless ImportOptions.NoApproval.
func (t *Imported) Spec() *guard.ToolSpec { return &t.spec }

// Name returns the tool's name.
func (t *Imported) Name() string { return t.spec.Name }

// Description returns the tool's description.
func (t *Imported) Description() string { return t.desc }

// Schema returns the tool's parameters compiled, the schema its arguments
// are validated against; it is not Strict.
func (t *Imported) Schema() *toolset.Schema { return t.schema }

// Decode implements guard.Tool: the arguments must be a JSON object the
// tool's schema accepts; the input is their canonical JSON.
func (t *Imported) Decode(canonical []byte, parsed any) (any, error) {
	if _, ok := parsed.(map[string]any); !ok {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments must be a JSON object.")
	}
	if err := t.schema.Validate(parsed); err != nil {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments do not match the tool's schema.")
	}
	return json.RawMessage(canonical), nil
}

// AuthorizeCall implements guard.Tool with ImportOptions.Authorize.
func (t *Imported) AuthorizeCall(ctx context.Context, inv *guard.Invocation) error {
	return t.authorize(ctx, t.spec.Name, inv)
}

// Execute implements guard.Tool: the framework's ExecFunc, under a
// context carrying the invocation (InvocationFrom). A panic of the tool
// is its failure (for a write, an unknown outcome); an error is the
// tool's failure unless it is a guard error that says otherwise
// (guard.NotStarted, guard.ErrNotFound, …).
func (t *Imported) Execute(ctx context.Context, inv *guard.Invocation) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("host: tool %q panicked: %v", t.spec.Name, r)
		}
	}()
	return t.exec(withInvocation(ctx, inv), inv)
}

// errNoReceipt is the inconclusive answer of an imported tool without a
// Receipt hook.
var errNoReceipt = errors.New("host: the imported tool has no receipt lookup")

// LookupReceipt implements guard.Tool with ImportOptions.Receipt; without
// one, every lookup is inconclusive.
func (t *Imported) LookupReceipt(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
	if t.receipt == nil {
		return nil, false, errNoReceipt
	}
	return t.receipt(ctx, inv)
}
