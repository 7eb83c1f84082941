package tgadk

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/adk/v2/agent"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// ConfirmationPayload is the Payload of the ToolConfirmation a guarded
// write asks ADK for: what a human approves, exactly. A client may send it
// back in its confirmation response; when it does, its fingerprint must be
// the call's, or the answer is taken for another question's: the call is
// not approved, the model is told so, and the intent may be asked again.
type ConfirmationPayload struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Arguments are the canonical JSON of the call's arguments.
	Arguments json.RawMessage `json:"arguments"`
	// Fingerprint is guard.Fingerprint of the tool and arguments.
	Fingerprint string `json:"fingerprint"`
	// OperationID is the operation the grant will pay for, as the guard
	// names it (the host's, the scope's, or the call id).
	OperationID string `json:"operation_id,omitempty"`
}

// OtherAnswerMessage is the message of the APPROVAL_REQUIRED result a
// write gets when the confirmation response names another intent than the
// call's (ConfirmationPayload.Fingerprint): nothing is approved, and the
// call may be asked again.
const OtherAnswerMessage = "The approval that came back was for another request; nothing was run. Call the tool again to ask a human for this one."

// PendingMessage is the message of the APPROVAL_REQUIRED result recorded
// for a write while a human is asked: the run pauses on the confirmation,
// and the call runs again with the answer.
const PendingMessage = "A human has been asked to approve this action; the run continues once they decide."

// payload is what a human is asked to approve of a call whose request is
// r (host.NewApprovalRequest).
func payload(r host.ApprovalRequest) ConfirmationPayload {
	return ConfirmationPayload{Tool: r.Tool, Arguments: r.Arguments, Fingerprint: r.Fingerprint, OperationID: r.OperationID}
}

// ask puts the call to a human through ADK's confirmation: the run pauses
// with an adk_request_confirmation call, and the call's function response
// meanwhile says approval is pending.
func (a *Guarded) ask(ctx agent.Context, call guard.Call, req ConfirmationPayload) (map[string]any, error) {
	what := ""
	if t, ok := a.g.Tools().Lookup(call.Proposal.Name).(interface{ Description() string }); ok {
		what = t.Description()
	}
	hint := fmt.Sprintf("Approve %s with arguments %s? %s If you approve, it runs once, for %s.",
		call.Proposal.Name, req.Arguments, what, call.Principal.SubjectID)
	if err := ctx.RequestConfirmation(hint, req); err != nil {
		return nil, fmt.Errorf("tgadk: asking for confirmation: %w", err)
	}
	return host.Map(&guard.Result{Code: guard.CodeApprovalRequired, Delivery: guard.DeliveryFresh, Message: PendingMessage}), nil
}

// payloadMatches reports whether a confirmation response's payload, if it
// names a fingerprint at all, names this call's.
func payloadMatches(payload any, fp string) bool {
	if payload == nil {
		return true
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return false
	}
	var p struct {
		Fingerprint *string `json:"fingerprint"`
	}
	if json.Unmarshal(b, &p) != nil {
		return true // not our payload's shape: nothing to compare
	}
	return p.Fingerprint == nil || *p.Fingerprint == fp
}

// deniedKey is the session state key recording that a human declined an
// intent (by fingerprint) in this session.
func deniedKey(fp string) string { return "toolguard:denied:" + fp }

// sessionDenials keeps the noes of a session in its state
// (host.DenialStore), so that a resumed or retried run finds them.
type sessionDenials struct{}

func (sessionDenials) Add(ctx context.Context, req host.ApprovalRequest) {
	if actx := agentFrom(ctx); actx != nil {
		_ = actx.State().Set(deniedKey(req.Fingerprint), true)
	}
}

func (sessionDenials) Has(ctx context.Context, req host.ApprovalRequest) bool {
	actx := agentFrom(ctx)
	if actx == nil {
		return false
	}
	v, err := actx.State().Get(deniedKey(req.Fingerprint))
	return err == nil && v == true
}
