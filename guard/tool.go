package guard

import (
	"context"
	"encoding/json"
)

// Effect says whether a tool changes anything.
type Effect uint8

const (
	// Read tools have no side effect: they run before their result is
	// bound, may run again after a crash and never need approval.
	Read Effect = iota + 1
	// Write tools have side effects: they run at most once per
	// idempotency key, under a reservation.
	Write
)

// String returns "read" or "write".
func (e Effect) String() string {
	switch e {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "invalid"
}

// ToolSpec is a tool's static description: what the guard reads of a tool
// besides running it.
type ToolSpec struct {
	// Name is the exact, case-sensitive name the model calls.
	Name string
	// Effect tells read from write.
	Effect Effect
	// NeedsApproval makes a human approve each call. It applies to writes
	// only: reads never need approval.
	NeedsApproval bool
	// Repeatable says that identical repeats of a write are meant (a
	// message sent twice on purpose): each call is its own operation,
	// named by its call id, and a scope (ExecutionContext.Scope) does not
	// make a repeat replay. It applies to writes only.
	Repeatable bool
	// LoggedArguments names the top-level argument members that are safe
	// to copy into the audit record; the others are only fingerprinted.
	LoggedArguments []string
	// SecretArguments names the argument members that are secrets, as
	// secret paths ("name", "name.member", "name[].member", see
	// secretpath.go): where LoggedArguments names them (or the member
	// holding them), the audit record keeps their keyed hash (SecretHash),
	// never their value, and a typed error's message never shows the
	// values the model gave them. See secret.go.
	SecretArguments []string
	// SecretOutput names the output members that are secrets (secret
	// paths: "accounts{}.key", "body#.token" too): each is replaced by
	// SecretPlaceholder before the outcome is stored, audited or
	// answered. A tool names the secrets only its output's value places
	// with Invocation.WithholdOutput.
	SecretOutput []string
	// Budget bounds what one run spends on the tool (budget.go); the
	// zero value bounds nothing.
	Budget Budget
	// Transactional says that a write's effect is rows in the store's own
	// database: the guard runs it inside the store's transaction
	// (TxStore.RunTx), so its rows, the reservation, the outcome and the
	// audit record commit together or not at all, and its outcome is never
	// unknown. On a store that is not a TxStore it does not run: the call
	// is UNAVAILABLE. It applies to writes only; pgstore.WriteTx declares
	// such a tool.
	Transactional bool
}

// Tool is what the guard needs of a tool: its description (Spec) and what
// it does at run time. Package toolset builds them from typed Go functions;
// most code never implements Tool by hand.
type Tool interface {
	// Spec returns the tool's description. The guard reads it on every
	// call: return the same, unchanging value each time.
	Spec() *ToolSpec
	// Decode validates the parsed arguments (a tree of nil, bool, string,
	// json.Number, []any and map[string]any) against the tool's schema and
	// decodes the canonical JSON into the tool's input. It returns an
	// *Error with code InvalidArguments when they do not fit.
	Decode(canonical []byte, parsed any) (any, error)
	// AuthorizeCall decides whether the principal may act on what the input
	// names. It returns ErrNotFound (or any error with code NotFound) when
	// not; other errors fail closed the same way.
	AuthorizeCall(ctx context.Context, inv *Invocation) error
	// Execute runs the tool and returns its output as JSON.
	Execute(ctx context.Context, inv *Invocation) (json.RawMessage, error)
	// LookupReceipt asks the downstream system whether the operation with
	// inv.IdempotencyKey happened, for a status query. An error means the
	// lookup was inconclusive (a tool with no lookup returns one). found
	// false with a nil error is a promise: the downstream system has no
	// operation under that key, and deduplicates by it, so a late arrival
	// of the first attempt and a re-execution make one side effect; after
	// the reservation's lease the guard then lets the operation run again.
	// Input and Arguments are nil here.
	LookupReceipt(ctx context.Context, inv *Invocation) (out json.RawMessage, found bool, err error)
}

// Tools finds tools by exact name.
type Tools interface {
	Lookup(name string) Tool
}
