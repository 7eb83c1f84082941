package agentloop

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/toolguard/toolguard/guard"
)

// KeyFunc returns the operation id and idempotency key of a call in a run.
// fingerprint is guard.Fingerprint of the call's tool and arguments.
type KeyFunc func(runID string, call guard.Proposal, fingerprint string) (operationID, idempotencyKey string)

// DeriveKeys is the default KeyFunc: both are "op_" and the first 32 hex
// digits of SHA-256(run id, NUL, fingerprint). Within one run the same tool
// with the same canonical arguments is one operation: asked again, it is
// replayed, never run twice. Another run is another operation.
func DeriveKeys(runID string, _ guard.Proposal, fingerprint string) (string, string) {
	h := sha256.New()
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write([]byte(fingerprint))
	id := "op_" + hex.EncodeToString(h.Sum(nil))[:32]
	return id, id
}
