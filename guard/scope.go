package guard

import (
	"crypto/sha256"
	"encoding/hex"
)

// ScopeIDs returns the operation id and idempotency key of a write proposal
// in a scope: both are "op_" and the first 32 hex digits of SHA-256(scope,
// NUL, fingerprint). fingerprint is Fingerprint of the proposal.
//
// A scope is where "the same intent" is one operation: an agent run, an MCP
// session, a framework's session or invocation, or one the host names.
// Within it, the same tool with the same canonical arguments always gets
// the same ids, so a model that repeats itself replays the first outcome
// (and no human is asked again); another scope gets other ids, and so
// another operation. The guard applies it to every write whose
// ExecutionContext names a Scope and carries neither an operation id nor an
// idempotency key, unless the tool is Repeatable; package agentloop derives
// its runs' ids with it.
func ScopeIDs(scope, fingerprint string) (operationID, idempotencyKey string) {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(fingerprint))
	var sum [sha256.Size]byte
	id := "op_" + hex.EncodeToString(h.Sum(sum[:0]))[:32]
	return id, id
}

// applyScope gives a write in a scope its scope's ids (ScopeIDs), unless
// the host chose an operation id or a key, or the tool's identical repeats
// are meant (ToolSpec.Repeatable).
func (inv *Invocation) applyScope() {
	c := &inv.Context
	if c.Scope == "" || c.OperationID != "" || c.IdempotencyKey != "" || inv.tool == nil {
		return
	}
	if spec := inv.tool.Spec(); spec.Effect != Write || spec.Repeatable {
		return
	}
	c.OperationID, c.IdempotencyKey = ScopeIDs(c.Scope, inv.Fingerprint)
	inv.opID, inv.idemKey = c.OperationID, "k:"+c.IdempotencyKey
}
