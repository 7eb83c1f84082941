package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// Answer is what the step gives a framework for one tool call: a model
// result, or a question for a human that the framework puts through its
// own pause (an interrupt, a confirmation request, a durable wait). The
// run then resumes with the human's Decision (Host.Decide).
type Answer struct {
	// Result is the model result; nil when Ask is set.
	Result *guard.Result
	// Ask is what a human is asked before the call may run; nil when
	// Result is set.
	Ask *ApprovalRequest
}

// ErrOtherCall is Decide's error when the decision a run resumed with is
// about another principal or another intent than the call's: nothing runs.
var ErrOtherCall = errors.New("host: the resumed call is not the one put to a human (another principal or other arguments)")

// Answer is one tool call through the guard: a status query for the
// status tool (the call's principal, never one the model names), else a
// dispatch. A write that waits for a human's yes, with a Signer to mint
// its grant, is answered
//
//   - with the same no, when a human already declined this intent in the
//     scope (Options.Denials);
//   - through Options.Approver, inline, when there is one: its yes
//     dispatches again with a grant, anything else is a denial;
//   - with Ask, for the framework to pause on, unless Options.NoInterrupt.
//
// An error is the host's (a programming error the guard reported); tool
// failures are model results.
func (h *Host) Answer(ctx context.Context, call guard.Call) (Answer, error) {
	if h.IsStatus(call.Proposal.Name) {
		return Answer{Result: h.queryStatus(ctx, call)}, nil
	}
	res, err := h.g.Dispatch(ctx, call)
	if err != nil {
		return Answer{}, fmt.Errorf("tool call %q: %w", call.Proposal.Name, err)
	}
	if !h.asks(call, res) {
		return Answer{Result: res}, nil
	}
	req := NewApprovalRequest(h.g, call)
	if h.opts.Denials.Has(ctx, req) {
		// A human already said no to this very intent in this scope: the
		// same answer, without asking again (contract section 4).
		return Answer{Result: guard.Declined("")}, nil
	}
	if h.opts.Approver == nil {
		return Answer{Ask: &req}, nil
	}
	var d Decision
	if err := Safely(func() (err error) { d, err = h.opts.Approver.Approve(ctx, req); return err }); err != nil {
		// An approver that failed decided nothing: a denial this time,
		// not remembered; one whose wait ran out, an expiry.
		if errors.Is(err, context.DeadlineExceeded) {
			return Answer{Result: guard.Expired()}, nil
		}
		return Answer{Result: guard.Declined("")}, nil
	}
	res, err = h.decide(ctx, call, req, d, false)
	return Answer{Result: res}, err
}

// asks reports whether res, the guard's answer to call, is a write that
// waits for a human who is then asked (inline or through the framework's
// pause): NeedsApproval, with a signer to mint the grant.
func (h *Host) asks(call guard.Call, res *guard.Result) bool {
	return h.opts.Signer != nil && !(h.opts.NoInterrupt && h.opts.Approver == nil) && NeedsApproval(h.g, call, res)
}

// Pending is what a framework keeps of a question while its run is
// paused (in its checkpoint, interrupt metadata or workflow state): who
// was asked about which intent, so that the resume answers that very
// call. It holds no secret.
type Pending struct {
	TenantID    string `json:"tenant_id"`
	SubjectID   string `json:"subject_id"`
	Fingerprint string `json:"fingerprint"`
}

// PendingOf is what to keep of req while the run waits.
func PendingOf(req ApprovalRequest) Pending {
	return Pending{TenantID: req.Principal.TenantID, SubjectID: req.Principal.SubjectID, Fingerprint: req.Fingerprint}
}

// Decide answers call, at the resume of a run paused on asked, with the
// human's decision d. It fails with ErrOtherCall when call is not the one
// asked about (another principal, other arguments), and nothing runs. A
// yes becomes a grant bound to exactly this principal and proposal,
// signed by Options.Signer, and the call is dispatched with it: the grant
// pays for one execution. A no is dispatched without a grant, so nothing
// can run: an operation that already ran (a yes answered before) replays
// its outcome, which the model is told instead; otherwise the model gets
// the denial (d.Reason), once, and the no is remembered in the scope;
// a decision that expired (d.Expired: nobody decided in time) is told as
// such (guard.Expired), is not remembered, and the intent may be asked
// again.
func (h *Host) Decide(ctx context.Context, call guard.Call, asked Pending, d Decision) (*guard.Result, error) {
	req := NewApprovalRequest(h.g, call)
	if PendingOf(req) != asked {
		return nil, ErrOtherCall
	}
	return h.decide(ctx, call, req, d, true)
}

// decide carries out d for call, whose request is req; recheck dispatches
// a no first, for an operation that may have run since it was asked.
func (h *Host) decide(ctx context.Context, call guard.Call, req ApprovalRequest, d Decision, recheck bool) (*guard.Result, error) {
	if !d.Approved {
		if recheck {
			res, err := h.g.Dispatch(ctx, call)
			if err != nil {
				return nil, fmt.Errorf("tool call %q: %w", call.Proposal.Name, err)
			}
			if res.Code != guard.CodeApprovalRequired {
				return res, nil
			}
		}
		if d.Expired {
			return guard.Expired(), nil
		}
		h.opts.Denials.Add(ctx, req)
		return guard.Declined(d.Reason), nil
	}
	if h.opts.Signer == nil {
		return nil, errors.New("host: a run resumed with an approval needs Options.Signer")
	}
	tok, err := SignGrant(h.opts.Signer, h.opts.Clock, h.opts.GrantTTL, req, d.Approver)
	if err != nil {
		return nil, err
	}
	call.Approval = tok
	res, err := h.g.Dispatch(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("tool call %q: %w", call.Proposal.Name, err)
	}
	return res, nil
}

// queryStatus answers a call of the status tool: its arguments checked
// against its schema, then the guard's status query for the call's
// principal, never one the model names. An id the guard would refuse
// names no operation it ran: NOT_FOUND, not a host error; a store that
// cannot answer is UNAVAILABLE.
func (h *Host) queryStatus(ctx context.Context, call guard.Call) *guard.Result {
	in, bad := toolset.ParseStatus(call.Proposal.Arguments)
	if bad != nil {
		return bad
	}
	res, err := h.g.QueryStatus(ctx, in.Call(call.Principal, call.Context))
	if err != nil {
		return unavailable()
	}
	return res
}
