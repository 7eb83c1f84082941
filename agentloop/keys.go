package agentloop

import (
	"github.com/toolguard/toolguard/guard"
)

// KeyFunc returns the operation id and idempotency key of a write in a run.
// fingerprint is guard.Fingerprint of the call's tool and arguments. The
// default is guard.ScopeIDs with the run as the scope: within one run the
// same tool with the same canonical arguments is one operation, asked again
// it is replayed, never run twice; another run is another operation. A
// Repeatable tool's calls get no KeyFunc ids: each is its own operation.
type KeyFunc func(runID string, call guard.Proposal, fingerprint string) (operationID, idempotencyKey string)

// scopeKeys is the default KeyFunc: the run is the scope.
func scopeKeys(runID string, _ guard.Proposal, fingerprint string) (string, string) {
	return guard.ScopeIDs(runID, fingerprint)
}
