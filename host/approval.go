package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
)

// The approval step in the words every entry point uses (agentloop's Loop,
// the framework integrations, the durable engines): which answer waits for
// a human (NeedsApproval), what the human is asked (NewApprovalRequest),
// the human's answer (Decision), the grant a yes becomes (SignGrant), and
// the noes kept so that an intent declined is not asked again in its scope
// (Denials).

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
	// human's no, it does not stop the same intent being asked again, and
	// the model is told so (guard.Expired; Reason is not told).
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

// DefaultGrantTTL is how long a grant minted from a human's yes is valid
// when the host names no other time.
const DefaultGrantTTL = 5 * time.Minute

// NeedsApproval reports whether res, g's answer to call, is a write that
// waits for a human's yes: APPROVAL_REQUIRED for a write tool that needs
// approval, to a call that presented no grant. (A call that presented one
// and was refused, expired or bound to another intent, is answered as it
// is: asking again would not make that grant good.)
func NeedsApproval(g *guard.Guard, call guard.Call, res *guard.Result) bool {
	if res == nil || res.Code != guard.CodeApprovalRequired || call.Approval != "" {
		return false
	}
	t := g.Tools().Lookup(call.Proposal.Name)
	return t != nil && t.Spec().Effect == guard.Write && t.Spec().NeedsApproval
}

// NewApprovalRequest returns what a human is asked about call: its scope
// (call.Context.Scope) as the RunID, its call id, its tool and arguments
// (canonical JSON, members sorted, as the Loop shows them; arguments that
// are not JSON as they are), its principal, the fingerprint a grant must
// carry, and the operation g runs it as (guard.Guard.OperationID), so that
// the request names what the grant pays for.
func NewApprovalRequest(g *guard.Guard, call guard.Call) ApprovalRequest {
	args := call.Proposal.Arguments
	if c, _, err := canon.Parse(args, canon.Limits{}); err == nil {
		args = c
	}
	return ApprovalRequest{RunID: call.Context.Scope, CallID: call.Context.CallID, Tool: call.Proposal.Name,
		Arguments: json.RawMessage(args), Principal: call.Principal, Fingerprint: guard.Fingerprint(call.Proposal.Name, args),
		OperationID: g.OperationID(call)}
}

// DefaultApprover names the approver of a grant whose Decision named none.
const DefaultApprover = "human"

// SignGrant mints the grant of a human's yes to req and signs it with s:
// bound to exactly req's principal and proposal, valid for ttl from
// clock's now (DefaultGrantTTL when ttl is 0 or less; guard.SystemClock
// when clock is nil), naming approver (DefaultApprover when ""). The
// token pays for one execution of that intent (contract section 4). It
// fails when req's arguments are not the ones its fingerprint names.
func SignGrant(s *guard.Signer, clock guard.Clock, ttl time.Duration, req ApprovalRequest, approver string) (string, error) {
	if s == nil {
		return "", errors.New("host: a grant needs a signer")
	}
	if clock == nil {
		clock = guard.SystemClock
	}
	if ttl <= 0 {
		ttl = DefaultGrantTTL
	}
	if approver == "" {
		approver = DefaultApprover
	}
	g := guard.NewGrant(req.Principal, guard.Proposal{Name: req.Tool, Arguments: req.Arguments}, approver, clock.Now(), ttl)
	if g.Fingerprint != req.Fingerprint {
		return "", errors.New("host: approval request's arguments do not match its fingerprint")
	}
	return s.Sign(g)
}

// Denials remembers, in this process, the intents humans declined, by
// principal, scope (RunID) and fingerprint, so that a host answers the
// same intent in the same scope with the same no instead of asking again.
// A request without a scope is not remembered. It holds at most
// MaxDenials; when full it forgets everything, and a forgotten denial is
// asked again. The zero value is ready to use, and it is safe for
// concurrent use. (agentloop's Loop keeps its noes in the run's State instead.)
type Denials struct {
	mu   sync.Mutex
	seen map[denialKey]struct{}
}

// maxDenials is how many denials a Denials holds at most.
const maxDenials = 4096

type denialKey struct{ tenant, subject, scope, fingerprint string }

func keyOf(r ApprovalRequest) denialKey {
	return denialKey{r.Principal.TenantID, r.Principal.SubjectID, r.RunID, r.Fingerprint}
}

// Add remembers that a human declined r.
func (d *Denials) Add(r ApprovalRequest) {
	if r.RunID == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil || len(d.seen) >= maxDenials {
		d.seen = make(map[denialKey]struct{})
	}
	d.seen[keyOf(r)] = struct{}{}
}

// Has reports whether a human declined r's intent, for r's principal in
// r's scope.
func (d *Denials) Has(r ApprovalRequest) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.seen[keyOf(r)]
	return ok
}
