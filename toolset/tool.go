// Package toolset declares tools from typed Go functions. The input schema
// is derived from the input struct (OpenAI strict mode), compiled once per
// type, and used both as the definition the model is given and to validate
// the model's arguments before they are decoded into the struct.
//
//	getOrder := toolset.Read("get_order", "Look up an order.",
//		func(ctx context.Context, inv *guard.Invocation, in GetOrderIn) (Order, error) { … })
//	refund := toolset.Write("create_refund_draft", "Draft a refund.", createDraft).
//		RequireApproval().
//		Authorize(ownsOrder).
//		Receipt(findDraft)
//	tools := toolset.MustNew(getOrder, refund)
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

// Tool is a typed tool. It implements guard.Tool; its methods that return
// *Tool configure it and are meant to be chained at declaration.
type Tool[In, Out any] struct {
	name        string
	description string
	effect      guard.Effect
	approval    bool
	schema      *Schema
	fn          Func[In, Out]
	authorize   AuthorizeFunc[In]
	receipt     ReceiptFunc[Out]
	logged      []string
}

// Read declares a tool without side effects. It panics if In cannot be
// expressed as a strict JSON Schema (see SchemaFor), like regexp.MustCompile:
// tools are declared at start-up.
func Read[In, Out any](name, description string, fn Func[In, Out]) *Tool[In, Out] {
	return newTool(name, description, guard.Read, fn)
}

// Write declares a tool with side effects: it runs at most once per
// idempotency key. It panics like Read.
func Write[In, Out any](name, description string, fn Func[In, Out]) *Tool[In, Out] {
	return newTool(name, description, guard.Write, fn)
}

func newTool[In, Out any](name, description string, effect guard.Effect, fn Func[In, Out]) *Tool[In, Out] {
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
	return &Tool[In, Out]{name: name, description: description, effect: effect, schema: s, fn: fn}
}

// RequireApproval makes every call of a write tool need a signed approval
// grant. It has no effect on read tools, which never need one.
func (t *Tool[In, Out]) RequireApproval() *Tool[In, Out] {
	t.approval = true
	return t
}

// Authorize sets the authorization hook, run after validation and before
// approval.
func (t *Tool[In, Out]) Authorize(fn AuthorizeFunc[In]) *Tool[In, Out] {
	t.authorize = fn
	return t
}

// Receipt sets the receipt lookup used to settle unknown outcomes. found
// false with a nil error promises that the downstream system has no
// operation under inv.IdempotencyKey and deduplicates by that key (see
// guard.Tool.LookupReceipt): return an error when it cannot be sure.
func (t *Tool[In, Out]) Receipt(fn ReceiptFunc[Out]) *Tool[In, Out] {
	t.receipt = fn
	return t
}

// LogArguments names top-level argument members safe to copy into the audit
// record. Others are only fingerprinted.
func (t *Tool[In, Out]) LogArguments(names ...string) *Tool[In, Out] {
	t.logged = append(t.logged, names...)
	return t
}

// Name implements guard.Tool.
func (t *Tool[In, Out]) Name() string { return t.name }

// Description returns the description given to the model.
func (t *Tool[In, Out]) Description() string { return t.description }

// Schema returns the input schema.
func (t *Tool[In, Out]) Schema() *Schema { return t.schema }

// Effect implements guard.Tool.
func (t *Tool[In, Out]) Effect() guard.Effect { return t.effect }

// NeedsApproval implements guard.Tool.
func (t *Tool[In, Out]) NeedsApproval() bool { return t.approval && t.effect == guard.Write }

// LoggedArguments implements guard.Tool.
func (t *Tool[In, Out]) LoggedArguments() []string { return t.logged }

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
		return nil, guard.NotStarted(fmt.Errorf("toolset: tool %q got input of type %T", t.name, inv.Input))
	}
	out, err := t.fn(ctx, inv, in)
	if err != nil {
		return nil, err
	}
	return marshalOutput(t.name, out)
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
	b, err := marshalOutput(t.name, out)
	return b, err == nil, err
}

func marshalOutput(name string, out any) (json.RawMessage, error) {
	b, err := json.Marshal(out)
	if err != nil {
		// The side effect happened but its result cannot be told: the
		// guard must treat this as unknown, not as a failure.
		return nil, guard.UnknownOutcome(fmt.Errorf("toolset: tool %q output: %w", name, err))
	}
	return b, nil
}
