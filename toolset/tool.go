// Package toolset declares tools from typed Go functions. The input schema
// is derived from the input struct (OpenAI strict mode), compiled once per
// type, and used both as the definition the model is given and to validate
// the model's arguments before they are decoded into the struct.
//
//	getOrder := toolset.Read("get_order", "Look up an order.",
//		func(ctx context.Context, inv *guard.Invocation, in GetOrderIn) (Order, error) { … }, nil)
//	refund := toolset.Write("create_refund_draft", "Draft a refund.", createDraft,
//		&toolset.Options[RefundIn, Draft]{NeedsApproval: true, Authorize: ownsOrder, Receipt: findDraft})
//	tools := toolset.MustNew(getOrder, refund)
//
// Configuration is an Options struct whose zero value (or nil) means the
// defaults, as everywhere in this module (guard.Options, idem.Options,
// observe.Options): every setting is a named field, documented in one
// place and readable at the call site.
package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/toolguard/toolguard/guard"
)

// Func is a tool's typed implementation. inv carries the principal, the
// downstream idempotency key and the approval grant; in is the validated,
// decoded input.
type Func[In, Out any] func(ctx context.Context, inv *guard.Invocation, in In) (Out, error)

// AuthorizeFunc decides whether inv.Principal may act on what in names. It
// returns guard.ErrNotFound when not: the model is told the resource does
// not exist, exactly as if it did not.
type AuthorizeFunc[In any] func(ctx context.Context, inv *guard.Invocation, in In) error

// ReceiptFunc asks the downstream system for the result of the operation
// with inv.IdempotencyKey. found is false, with a nil error, when there is
// no receipt; an error means the lookup could not tell.
type ReceiptFunc[Out any] func(ctx context.Context, inv *guard.Invocation) (out Out, found bool, err error)

// Options configure a tool; nil or the zero value means none of them.
type Options[In, Out any] struct {
	// NeedsApproval makes every call of a write tool need a signed
	// approval grant. Read tools never need one; it is ignored for them.
	NeedsApproval bool
	// Repeatable marks a write whose identical repeats are meant (a
	// reminder sent twice on purpose): each call is its own operation,
	// and a scope does not make a repeat replay (guard.ToolSpec.Repeatable).
	// By default the same intent in one scope is one operation.
	Repeatable bool
	// Authorize decides whether the principal may act on what the input
	// names; it runs after validation and before approval. Nil: every
	// principal may.
	Authorize AuthorizeFunc[In]
	// Receipt asks the downstream system for an operation's result, to
	// settle unknown outcomes. found false with a nil error promises that
	// the downstream system has no operation under inv.IdempotencyKey and
	// deduplicates by that key (see guard.Tool.LookupReceipt): return an
	// error when it cannot be sure. Nil: outcomes stay unknown until an
	// operator settles them.
	Receipt ReceiptFunc[Out]
	// LoggedArguments names top-level argument members safe to copy into
	// the audit record. Others are only fingerprinted.
	LoggedArguments []string
	// Budget bounds what one run spends on the tool (guard.Budget): at
	// most MaxCalls executions and MaxCost cost units, each execution
	// costing Cost, or CostOf(input). Nil: no bound.
	Budget *Budget[In]
}

// Budget bounds what one run spends on a tool (guard.Budget), with the
// cost of an execution priced from its typed input.
type Budget[In any] struct {
	MaxCalls int64
	Cost     int64
	CostOf   func(in In) int64
	MaxCost  int64
}

// spec is the budget as the guard reads it.
func (b *Budget[In]) spec() guard.Budget {
	if b == nil {
		return guard.Budget{}
	}
	out := guard.Budget{MaxCalls: b.MaxCalls, Cost: b.Cost, MaxCost: b.MaxCost}
	if f := b.CostOf; f != nil {
		out.CostOf = func(input any) int64 {
			in, _ := input.(In)
			return f(in)
		}
	}
	return out
}

// Tool is a typed tool. It implements guard.Tool.
type Tool[In, Out any] struct {
	spec        guard.ToolSpec
	description string
	schema      *Schema
	fn          Func[In, Out]
	authorize   AuthorizeFunc[In]
	receipt     ReceiptFunc[Out]
	// walkOut: Out's values hold secrets its paths do not reach, found in
	// each output (secret.go).
	walkOut bool
}

// Read declares a tool without side effects. It panics if In cannot be
// expressed as a strict JSON Schema (see SchemaFor), like regexp.MustCompile:
// tools are declared at start-up. opts may be nil.
func Read[In, Out any](name, description string, fn Func[In, Out], opts *Options[In, Out]) *Tool[In, Out] {
	return newTool(name, description, guard.Read, fn, opts)
}

// Write declares a tool with side effects: it runs at most once per
// idempotency key. It panics like Read. opts may be nil.
func Write[In, Out any](name, description string, fn Func[In, Out], opts *Options[In, Out]) *Tool[In, Out] {
	return newTool(name, description, guard.Write, fn, opts)
}

func newTool[In, Out any](name, description string, effect guard.Effect, fn Func[In, Out], opts *Options[In, Out]) *Tool[In, Out] {
	if err := checkName(name); err != nil {
		panic(err)
	}
	if fn == nil {
		panic(fmt.Sprintf("toolset: tool %q has a nil function", name))
	}
	s, err := schemaForType(reflect.TypeFor[In]())
	if err != nil {
		panic(err)
	}
	if opts == nil {
		opts = &Options[In, Out]{}
	}
	out := secretsOf(reflect.TypeFor[Out]())
	return &Tool[In, Out]{
		spec: guard.ToolSpec{Name: name, Effect: effect, NeedsApproval: opts.NeedsApproval && effect == guard.Write,
			Repeatable: opts.Repeatable && effect == guard.Write, LoggedArguments: append([]string(nil), opts.LoggedArguments...),
			SecretArguments: mustSecretPaths(name, reflect.TypeFor[In]()), SecretOutput: out.paths,
			Budget: opts.Budget.spec()},
		description: description, schema: s, fn: fn, authorize: opts.Authorize, receipt: opts.Receipt, walkOut: out.walk,
	}
}

// Spec implements guard.Tool.
func (t *Tool[In, Out]) Spec() *guard.ToolSpec { return &t.spec }

// Name returns the tool's name.
func (t *Tool[In, Out]) Name() string { return t.spec.Name }

// Description returns the description given to the model.
func (t *Tool[In, Out]) Description() string { return t.description }

// Schema returns the input schema.
func (t *Tool[In, Out]) Schema() *Schema { return t.schema }

// Decode implements guard.Tool: the parsed arguments must be an object that
// the schema accepts, and the canonical JSON must decode into In (which
// catches numbers that overflow the Go type).
func (t *Tool[In, Out]) Decode(canonical []byte, parsed any) (any, error) {
	if _, ok := parsed.(map[string]any); !ok {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments must be a JSON object.")
	}
	if err := t.schema.Validate(parsed); err != nil {
		return nil, guard.NewError(guard.CodeInvalidArguments, validationMessage(err))
	}
	var in In
	if err := json.Unmarshal(canonical, &in); err != nil {
		return nil, guard.NewError(guard.CodeInvalidArguments, "The arguments do not fit the tool's input types (a number out of range?).")
	}
	return in, nil
}

// AuthorizeCall implements guard.Tool by calling the Authorize hook.
func (t *Tool[In, Out]) AuthorizeCall(ctx context.Context, inv *guard.Invocation) error {
	if t.authorize == nil {
		return nil
	}
	in, ok := inv.Input.(In)
	if !ok {
		return guard.ErrNotFound
	}
	return t.authorize(ctx, inv, in)
}

// Execute implements guard.Tool.
func (t *Tool[In, Out]) Execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	in, ok := inv.Input.(In)
	if !ok {
		return nil, guard.NotStarted(fmt.Errorf("toolset: tool %q got input of type %T", t.spec.Name, inv.Input))
	}
	out, err := t.fn(ctx, inv, in)
	if err != nil {
		return nil, err
	}
	return t.marshalOutput(inv, out)
}

// errNoReceipt is the inconclusive answer of a tool without a receipt
// lookup: nothing can say its operation did not happen.
var errNoReceipt = errors.New("toolset: the tool has no receipt lookup")

// LookupReceipt implements guard.Tool by calling the Receipt hook.
func (t *Tool[In, Out]) LookupReceipt(ctx context.Context, inv *guard.Invocation) (json.RawMessage, bool, error) {
	if t.receipt == nil {
		return nil, false, errNoReceipt
	}
	out, found, err := t.receipt(ctx, inv)
	if err != nil || !found {
		return nil, false, err
	}
	b, err := t.marshalOutput(inv, out)
	return b, err == nil, err
}

// marshalOutput writes an output (or a receipt), and names to the guard
// the secrets in it that only the value places.
func (t *Tool[In, Out]) marshalOutput(inv *guard.Invocation, out Out) (json.RawMessage, error) {
	b, err := json.Marshal(out)
	if err != nil {
		// The side effect happened but its result cannot be told: the
		// guard must treat this as unknown, not as a failure.
		return nil, guard.UnknownOutcome(fmt.Errorf("toolset: tool %q output: %w", t.spec.Name, err))
	}
	if t.walkOut {
		// (By value, not &out: taking out's address would move every
		// output to the heap, walked or not.)
		inv.WithholdOutput(runtimeSecrets(reflect.ValueOf(out), "", nil)...)
	}
	return b, nil
}
