package agentloop

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// ApprovalRequest is a write the model asked for that needs a human's yes
// (host.ApprovalRequest: every entry point asks the same question).
type ApprovalRequest = host.ApprovalRequest

// Decision is a human's answer to an ApprovalRequest (host.Decision).
type Decision = host.Decision

// Approver asks a human (host.Approver).
type Approver = host.Approver

// ApproverFunc adapts a function to Approver (host.ApproverFunc).
type ApproverFunc = host.ApproverFunc

// DefaultApprover names the approver of a grant whose Decision named none.
const DefaultApprover = host.DefaultApprover

// MaxDenials is how many denials a Denials holds at most.
const MaxDenials = host.MaxDenials

// Denials remembers, in this process, the intents humans declined
// (host.Denials). A Loop keeps its noes in the run's State instead.
type Denials = host.Denials

// NeedsApproval reports whether res, g's answer to call, is a write that
// waits for a human's yes (host.NeedsApproval).
func NeedsApproval(g *guard.Guard, call guard.Call, res *guard.Result) bool {
	return host.NeedsApproval(g, call, res)
}

// NewApprovalRequest returns what a human is asked about call
// (host.NewApprovalRequest).
func NewApprovalRequest(g *guard.Guard, call guard.Call) ApprovalRequest {
	return host.NewApprovalRequest(g, call)
}

// SignGrant mints the grant of a human's yes to req and signs it with s
// (host.SignGrant).
func SignGrant(s *guard.Signer, clock guard.Clock, ttl time.Duration, req ApprovalRequest, approver string) (string, error) {
	return host.SignGrant(s, clock, ttl, req, approver)
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
