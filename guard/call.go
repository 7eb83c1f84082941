package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// Proposal is what the model asked for: a tool name and its arguments as
// the model wrote them. Arguments may be anything, including text that is
// not JSON; the guard answers that with INVALID_ARGUMENTS.
type Proposal struct {
	Name      string
	Arguments json.RawMessage
}

// ExecutionContext says where a proposal came from. Adapters fill it from
// the provider's response; the host may set OperationID and IdempotencyKey.
type ExecutionContext struct {
	Provider        string // e.g. "openai"
	APIFamily       string // e.g. "responses"
	ResponseID      string // the provider's response that carried the call
	CallID          string // the provider's id of this tool call
	OperationID     string // the host's id for the operation; defaults to CallID
	IdempotencyKey  string // "" means none (null in the contract)
	AdapterRevision string // e.g. "openai-responses-v1"
	// Scope names where the same intent is one operation (ScopeIDs): the
	// agent run, the MCP session, the framework's session or invocation.
	// A write with a scope and neither OperationID nor IdempotencyKey
	// takes ScopeIDs(Scope, fingerprint) as both, so repeating it in the
	// scope replays; "" applies no scope, and the operation is the call.
	Scope string
}

// ErrBadID is returned to the host for a call id, operation id,
// idempotency key or scope that is not valid UTF-8 or is longer than
// MaxIDBytes.
var ErrBadID = errors.New("guard: call ids, operation ids, idempotency keys and scopes must be valid UTF-8 of at most 512 bytes")

// ErrNoIdentity is returned to the host for a write that carries no call
// id, no idempotency key and no operation id: nothing could tell its retry
// from a new intent, so it is not run.
var ErrNoIdentity = errors.New("guard: a write needs a call id, an idempotency key or an operation id")

// validate checks the ids' bounds; "" (none) is always valid.
func (c *ExecutionContext) validate() error {
	for _, id := range [4]string{c.CallID, c.OperationID, c.IdempotencyKey, c.Scope} {
		if id != "" && !validID(id) {
			return ErrBadID
		}
	}
	return nil
}

// SafeID returns a provider's id unchanged when the guard accepts it (valid
// UTF-8, at most MaxIDBytes), and otherwise a stable stand-in derived from
// its bytes ("sha256:" and their hex digest), so that a provider's odd id
// still identifies its call and its retries. Adapters pass call ids they
// read from a provider through it; ids the host chooses should be valid.
func SafeID(id string) string {
	if id == "" || validID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Call is one dispatch: a proposal, where it came from, who it acts for and
// the approval grant the host obtained for it, if any.
type Call struct {
	Principal Principal
	Proposal  Proposal
	Context   ExecutionContext
	// Approval is a signed grant token from Signer.Sign, or "".
	Approval string
	// Step, when set, names the durable step that makes this call: an id
	// that is the same each time an engine runs the step again after a
	// crash or a retry, and another for every other step (package durable
	// derives it from the workflow id and the engine's step id). A
	// write's reservation is then the step's, not the dispatch's: its
	// token is derived from Step and the write's key, so the step run
	// again after its process died finds its own reservation instead of
	// being answered IN_PROGRESS, and settles it (Guard.Dispatch). ""
	// (every host that is not a durable engine): each dispatch reserves
	// under a token of its own.
	Step string
}

// StatusCall asks for the outcome of an earlier operation of the same
// principal.
type StatusCall struct {
	Principal   Principal
	OperationID string
	// Tool optionally names the operation's tool, for the audit record.
	Tool string
	// Context describes the query itself (its own call id, response id);
	// it is audited.
	Context ExecutionContext
}

// Invocation is a call as the guard has checked it so far. Tools receive it
// read-only: the principal, the canonical arguments, the decoded input, the
// downstream idempotency key and the approval grant.
type Invocation struct {
	Principal Principal
	Proposal  Proposal
	Context   ExecutionContext
	// Fingerprint is the hex SHA-256 of the canonical {name, arguments}.
	Fingerprint string
	// Arguments holds the canonical JSON of the arguments, nil if they
	// were not valid JSON.
	Arguments []byte
	// Input is the decoded input, set once the arguments passed the
	// tool's schema.
	Input any
	// IdempotencyKey is the key to hand the downstream system, derived
	// from the tenant, the subject and the effective idempotency key, so
	// that two tenants choosing the same key never collide downstream.
	IdempotencyKey string
	// Grant is the verified approval grant, if one was given and valid.
	// It is shared: tools must not modify it.
	Grant *Grant
	// Now is the guard's clock at the start of the dispatch.
	Now time.Time

	tool     Tool
	args     any   // parsed argument tree, for schema validation
	argsErr  error // why the arguments are not valid JSON
	idemKey  string
	opID     string
	approval string
	secrets  *Redactor // the guard's key and detector of secrets (secret.go)
	// outSecrets are the output paths the tool named (WithholdOutput): a
	// pointer, which keeps an invocation and its entry in one size class.
	outSecrets *[]string
}

// WithholdOutput names members of the output this execution returns (or
// of the receipt this lookup returns) that are secrets, beside the tool's
// ToolSpec.SecretOutput: for a secret whose place is known only at run
// time, such as a value in an interface field or a map. Each path has
// SecretOutput's syntax. The guard withholds them as it does declared
// ones; a path that does not parse withholds the whole output. Call it
// from the tool's own goroutine, before Execute or LookupReceipt returns.
// Package toolset calls it for the fields tagged toolguard:"secret" it
// finds in interface values.
func (inv *Invocation) WithholdOutput(paths ...string) {
	if inv.outSecrets == nil {
		inv.outSecrets = new([]string)
	}
	*inv.outSecrets = append(*inv.outSecrets, paths...)
}

// withheld returns the paths the tool named, and forgets them.
func (inv *Invocation) withheld() []string {
	if inv.outSecrets == nil {
		return nil
	}
	p := *inv.outSecrets
	inv.outSecrets = nil
	return p
}

// Tool returns the tool the proposal names, once looked up.
func (inv *Invocation) Tool() Tool { return inv.tool }
