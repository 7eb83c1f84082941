package tgeino

import (
	"context"
	"errors"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
)

func init() {
	// Eino keeps an interrupt's info and state in its checkpoints (adk
	// with gob, compose with its own serializer): both must know the types.
	schema.RegisterName[agentloop.ApprovalRequest]("toolguard_eino_approval_request")
	schema.RegisterName[*pendingState]("toolguard_eino_pending_state")
}

// pendingState is what an approval interrupt keeps in the checkpoint: who
// was asked about which intent, so that a resume answers that very call.
type pendingState struct {
	TenantID, SubjectID, Fingerprint string
}

// ErrNoDecision is returned, as the tool call's error, when a run is
// resumed at an approval interrupt without an agentloop.Decision as the
// resume data.
var ErrNoDecision = errors.New("tgeino: the run was resumed at an approval interrupt without an agentloop.Decision")

// ErrOtherCall is returned, as the tool call's error, when a run is resumed
// at an approval interrupt by another principal, or the call there is not
// the one the human was asked about; nothing runs.
var ErrOtherCall = errors.New("tgeino: the resumed call is not the one put to a human (another principal or other arguments)")

// Approval is one call of an interrupted run that waits for a human: the
// interrupt id to resume it by, and what the human is asked.
type Approval struct {
	// InterruptID is Eino's id of the interrupt: the key of the decision
	// given to Resume (or to adk's ResumeParams.Targets).
	InterruptID string
	// Request is the exact intent: tool, arguments (compact, members
	// sorted), principal, fingerprint, operation id; RunID is the call's
	// scope.
	Request agentloop.ApprovalRequest
}

// Approvals returns the approval requests among an interrupted run's
// interrupt contexts: compose.ExtractInterruptInfo(err).InterruptContexts
// for a compose graph, an adk event's Action.Interrupted.InterruptContexts
// for an agent.
func Approvals(contexts []*compose.InterruptCtx) []Approval {
	var out []Approval
	for _, c := range contexts {
		if req, ok := c.Info.(agentloop.ApprovalRequest); ok && c.IsRootCause {
			out = append(out, Approval{InterruptID: c.ID, Request: req})
		}
	}
	return out
}

// ApprovalsOf returns the approval requests of the error a compose
// graph's Invoke or Stream returned when its run was interrupted; none for
// any other error.
func ApprovalsOf(err error) []Approval {
	info, ok := compose.ExtractInterruptInfo(err)
	if !ok || info == nil {
		return nil
	}
	return Approvals(info.InterruptContexts)
}

// Resume returns ctx carrying the humans' decisions, by interrupt id, for
// resuming a compose graph from its checkpoint
// (compose.BatchResumeWithData). For an adk Runner pass the same map, as
// map[string]any, in ResumeParams.Targets.
func Resume(ctx context.Context, decisions map[string]agentloop.Decision) context.Context {
	data := make(map[string]any, len(decisions))
	for id, d := range decisions {
		data[id] = d
	}
	return compose.BatchResumeWithData(ctx, data)
}

// DeniedMessage is the message of the APPROVAL_REQUIRED result the model
// gets when a human said no, worded so that it stops and tells the user;
// agentloop's words.
const DeniedMessage = guard.DeclinedMessage

// needsHuman reports whether a dispatch's result is a write that waits
// for a human's approval who is then asked (an interrupt of the run, or
// Options.Approver): agentloop.NeedsApproval, with a signer to mint the
// grant.
func (eg *Guarded) needsHuman(call guard.Call, res *guard.Result) bool {
	return eg.opts.Signer != nil && !(eg.opts.NoInterrupt && eg.opts.Approver == nil) && agentloop.NeedsApproval(eg.g, call, res)
}

// grant mints and signs the grant of a human's yes to the request: bound
// to exactly its principal and proposal (agentloop.SignGrant).
func (eg *Guarded) grant(req agentloop.ApprovalRequest, approver string) (string, error) {
	return agentloop.SignGrant(eg.opts.Signer, eg.opts.Clock, eg.opts.GrantTTL, req, approver)
}

// resume handles a call at an approval interrupt the run resumes from. A
// call that was not interrupted is left alone. One that was, but is not the
// resume's target, interrupts again, keeping its place. The target's
// decision either becomes a signed grant on the call (answer "": the
// dispatch goes on) or, for a no, the answer the model gets, once, with
// nothing run.
func (eg *Guarded) resume(ctx context.Context, call *guard.Call) (answer string, err error) {
	was, has, st := compose.GetInterruptState[*pendingState](ctx)
	if !was {
		return "", nil
	}
	req := agentloop.NewApprovalRequest(eg.g, *call)
	target, _, data := compose.GetResumeContext[any](ctx)
	if !target {
		return "", compose.StatefulInterrupt(ctx, req, st)
	}
	var d agentloop.Decision
	switch v := data.(type) {
	case agentloop.Decision:
		d = v
	case *agentloop.Decision:
		if v == nil {
			return "", ErrNoDecision
		}
		d = *v
	default:
		return "", ErrNoDecision
	}
	p := call.Principal
	if !has || st == nil || st.TenantID != p.TenantID || st.SubjectID != p.SubjectID || st.Fingerprint != req.Fingerprint {
		return "", ErrOtherCall
	}
	if !d.Approved {
		if !d.Expired {
			eg.denials.Add(req)
		}
		return guard.Declined(d.Reason).String(), nil
	}
	if eg.opts.Signer == nil {
		return "", errors.New("tgeino: a run resumed with an approval needs Options.Signer")
	}
	call.Approval, err = eg.grant(req, d.Approver)
	return "", err
}
