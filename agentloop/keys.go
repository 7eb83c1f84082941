package agentloop

import (
	"github.com/toolguard/toolguard/guard"
)

// keyFunc is Options.Keys.
type keyFunc func(runID string, call guard.Proposal, fingerprint string) (operationID, idempotencyKey string)

// scopeKeys is the default keyFunc: the run is the scope.
func scopeKeys(runID string, _ guard.Proposal, fingerprint string) (string, string) {
	return guard.ScopeIDs(runID, fingerprint)
}
