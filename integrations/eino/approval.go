package tgeino

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

func init() {
	// Eino keeps an interrupt's info and state in its checkpoints (adk
	// with gob, compose with its own serializer): both must know the types.
	schema.RegisterName[host.ApprovalRequest]("toolguard_eino_approval_request")
	// What an approval interrupt keeps in the checkpoint: who was asked
	// about which intent, so that a resume answers that very call.
	schema.RegisterName[*host.Pending]("toolguard_eino_pending_state")
}

// ErrNoDecision is returned, as the tool call's error, when a run is
// resumed at an approval interrupt without an host.Decision as the
// resume data.
var ErrNoDecision = errors.New("tgeino: the run was resumed at an approval interrupt without an host.Decision")

// Approval is one call of an interrupted run that waits for a human: the
// interrupt id to resume it by, and what the human is asked.
type Approval struct {
	// InterruptID is Eino's id of the interrupt: the key of the decision
	// given to Resume (or to adk's ResumeParams.Targets).
	InterruptID string
	// Request is the exact intent: tool, arguments (compact, members
	// sorted), principal, fingerprint, operation id; RunID is the call's
	// scope.
	Request host.ApprovalRequest
}

// Approvals returns the approval requests among an interrupted run's
// interrupt contexts: compose.ExtractInterruptInfo(err).InterruptContexts
// for a compose graph, an adk event's Action.Interrupted.InterruptContexts
// for an agent.
func Approvals(contexts []*compose.InterruptCtx) []Approval {
	var out []Approval
	for _, c := range contexts {
		if req, ok := c.Info.(host.ApprovalRequest); ok && c.IsRootCause {
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
func Resume(ctx context.Context, decisions map[string]host.Decision) context.Context {
	data := make(map[string]any, len(decisions))
	for id, d := range decisions {
		data[id] = d
	}
	return compose.BatchResumeWithData(ctx, data)
}

// resume answers a call at an approval interrupt the run resumes from. A
// call that was not interrupted is left alone (nil: the dispatch goes on).
// One that was, but is not the resume's target, interrupts again, keeping
// its place. The target's decision is carried out by the host step
// (host.Host.Decide): a yes runs the call once with a signed grant, a no is
// the answer the model gets, once, with nothing run.
func (eg *Guarded) resume(ctx context.Context, call guard.Call) (*guard.Result, error) {
	was, has, st := compose.GetInterruptState[*host.Pending](ctx)
	if !was {
		return nil, nil
	}
	target, _, data := compose.GetResumeContext[any](ctx)
	if !target {
		return nil, compose.StatefulInterrupt(ctx, host.NewApprovalRequest(eg.h.Guard(), call), st)
	}
	var d host.Decision
	switch v := data.(type) {
	case host.Decision:
		d = v
	case *host.Decision:
		if v == nil {
			return nil, ErrNoDecision
		}
		d = *v
	default:
		return nil, ErrNoDecision
	}
	if !has || st == nil {
		return nil, host.ErrOtherCall
	}
	res, err := eg.h.Decide(ctx, call, *st, d)
	if err != nil && !errors.Is(err, host.ErrOtherCall) {
		err = fmt.Errorf("tgeino: %w", err)
	}
	return res, err
}
