package agentloop

import (
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/host"
)

// Grant mints a signed grant for the request, for a host that approves a
// paused run: pass the token to Resume as an Approval.
func (l *Loop) Grant(req host.ApprovalRequest, approver string) (string, error) {
	if l.err != nil {
		return "", l.err
	}
	return host.SignGrant(l.signer, l.clock, l.grantTTL, req, approver)
}

// Approval answers one pending request of a paused run: a signed grant
// token, or Denied.
type Approval struct {
	CallID string
	Grant  string
	Denied bool
	// Approver names who decided, for the transcript; Reason, for a
	// denial, is told to the model.
	Approver, Reason string
	// Expired marks a denial because nobody decided in time: the model
	// is told so (guard.Expired, not Reason), and the same intent may be
	// put to a human again later in the run.
	Expired bool
}

// ErrNotPaused is returned by Resume for a state that waits for nothing.
var ErrNotPaused = errors.New("agentloop: the run is not waiting for approvals")

// ErrWrongPrincipal is returned by Resume when the host's principal is not
// the one the run was started for.
var ErrWrongPrincipal = errors.New("agentloop: the run belongs to another principal")

// ErrOtherProvider is returned by Resume when the loop's provider is not
// the API the run was started on.
var ErrOtherProvider = errors.New("agentloop: the run belongs to another provider")

func missingApproval(callID string) error {
	return fmt.Errorf("agentloop: no approval or denial given for pending call %s", callID)
}
