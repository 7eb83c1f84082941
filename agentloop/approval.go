package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
)

// ApprovalRequest is a write the model asked for that needs a human's yes.
// It has passed every other check (tool, arguments, authorization), so no
// human is ever asked about something the principal may not do.
type ApprovalRequest struct {
	RunID       string          `json:"run_id"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"` // canonical JSON
	Principal   guard.Principal `json:"principal"`
	Fingerprint string          `json:"fingerprint"`
	OperationID string          `json:"operation_id"`
}

// Decision is a human's answer to an ApprovalRequest.
type Decision struct {
	Approved bool
	// Approver names who decided; it is recorded in the grant and the
	// audit log.
	Approver string
	// Reason, for a denial, is told to the model (short, safe text): the
	// approver's message for it.
	Reason string
	// Note is the approver's internal note: kept in the approvals audit
	// log, never told to the model.
	Note string
	// Expired marks a denial because nobody decided in time: unlike a
	// human's no, it does not stop the same intent being asked again.
	Expired bool
}

// Approver asks a human.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// Grant mints a signed grant for the request, for a host that approves a
// paused run: pass the token to Resume as an Approval.
func (l *Loop) Grant(req ApprovalRequest, approver string) (string, error) {
	if l.err != nil {
		return "", l.err
	}
	return SignGrant(l.signer, l.clock, l.grantTTL, req, approver)
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
	// Expired marks a denial because nobody decided in time: the same
	// intent may be put to a human again later in the run.
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
