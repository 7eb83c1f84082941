package tggenkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/firebase/genkit/go/ai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// interruptKey is the member of an interrupted tool request's interrupt
// metadata (ai.Part.Metadata["interrupt"]) that holds the approval request,
// and of a restart's resumed metadata that holds the human's decision.
const interruptKey = "toolguard"

// ErrNotApproval is Resume's error for a part that is not a tool request
// this package interrupted for a human's approval.
var ErrNotApproval = errors.New("tggenkit: the part is not a tool request interrupted for approval")

// Approval is one tool request of an interrupted generation that waits for
// a human: the interrupted part, to resume it by, and what the human is
// asked.
type Approval struct {
	// Part is the interrupted tool request (ai.ModelResponse.Interrupts):
	// give it to Resume with the human's decision.
	Part *ai.Part
	// Request is the exact intent: tool, canonical arguments, principal,
	// fingerprint, operation id; RunID is the call's scope.
	Request host.ApprovalRequest
}

// Approvals returns the approval requests among an interrupted
// generation's interrupts: pass resp.Interrupts()... (FinishReason
// "interrupted"). Other interrupts are left out.
func Approvals(parts ...*ai.Part) []Approval {
	var out []Approval
	for _, p := range parts {
		if req, ok := requestOf(p); ok {
			out = append(out, Approval{Part: p, Request: req})
		}
	}
	return out
}

// Resume returns the restart of an interrupted tool request (an
// Approval's Part) carrying the human's decision, for ai.WithToolRestarts
// on the generation resumed from the interrupted response's history
// (ai.WithMessages(resp.History()...)), with the middleware and the same
// principal and scope. There a yes becomes a grant (guard.NewGrant, bound
// to exactly the principal and proposal the human was asked about, signed
// by Options.Signer) presented with the call, which runs once; a no is
// the result the model gets, once, and nothing runs.
func Resume(p *ai.Part, d host.Decision) (*ai.Part, error) {
	req, ok := requestOf(p)
	if !ok {
		return nil, ErrNotApproval
	}
	decision := map[string]any{"approved": d.Approved, "approver": d.Approver, "reason": d.Reason, "expired": d.Expired,
		"tenant_id": req.Principal.TenantID, "subject_id": req.Principal.SubjectID, "fingerprint": req.Fingerprint}
	meta := maps.Clone(p.Metadata)
	delete(meta, "interrupt")
	meta["resumed"] = map[string]any{interruptKey: decision}
	out := ai.NewToolRequestPart(&ai.ToolRequest{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Input: p.ToolRequest.Input})
	out.Metadata = meta
	return out, nil
}

// resumed is the decision Resume put in a restart's resumed metadata.
type resumed struct {
	Approved    bool   `json:"approved"`    // the human said yes
	Approver    string `json:"approver"`    // who decided: the grant's approver
	Reason      string `json:"reason"`      // a denial's reason, told to the model
	Expired     bool   `json:"expired"`     // nobody decided in time: the intent may be asked again
	TenantID    string `json:"tenant_id"`   // the principal asked about
	SubjectID   string `json:"subject_id"`  // the principal asked about
	Fingerprint string `json:"fingerprint"` // the intent asked about
}

// requestOf reads the approval request of an interrupted tool request.
func requestOf(p *ai.Part) (host.ApprovalRequest, bool) {
	var req host.ApprovalRequest
	if p == nil || !p.IsToolRequest() || p.Metadata == nil {
		return req, false
	}
	meta, ok := p.Metadata["interrupt"].(map[string]any)
	if !ok || meta[interruptKey] == nil {
		return req, false
	}
	if !convert(meta[interruptKey], &req) || req.Tool == "" || req.Fingerprint == "" {
		return host.ApprovalRequest{}, false
	}
	return req, true
}

// convert reads a JSON-shaped value (a map, or the value itself) into v.
func convert(from any, v any) bool {
	b, err := json.Marshal(from)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// interruptMetadata is the interrupt metadata of a call put to a human.
func interruptMetadata(req host.ApprovalRequest) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(req)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&m)
	return map[string]any{interruptKey: m}
}

// resume handles a call Genkit restarts with a decision (Resume). A call
// without one is left alone (nil: the dispatch goes on). The decision is
// carried out by the host step (host.Host.Decide): a yes runs the call
// once with a signed grant, a no is the answer the model gets, with
// nothing run.
func (a *Guarded) resume(ctx context.Context, call guard.Call) (*guard.Result, error) {
	v, ok := ai.ResumedValue[any](ctx, interruptKey)
	if !ok || v == nil {
		return nil, nil
	}
	var d resumed
	if !convert(v, &d) {
		return nil, host.ErrOtherCall
	}
	res, err := a.h.Decide(ctx, call, host.Pending{TenantID: d.TenantID, SubjectID: d.SubjectID, Fingerprint: d.Fingerprint},
		host.Decision{Approved: d.Approved, Approver: d.Approver, Reason: d.Reason, Expired: d.Expired})
	if err != nil && !errors.Is(err, host.ErrOtherCall) {
		err = fmt.Errorf("tggenkit: %w", err)
	}
	return res, err
}
