package tgeino

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

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

// denied is the model result of a denial, with the human's reason if any.
func denied(reason string) *guard.Result { return guard.Declined(reason) }

// needsHuman reports whether a dispatch's result is a write that waits
// for a human's approval, who is then asked (an interrupt of the run, or
// Options.Approver): APPROVAL_REQUIRED for a tool that needs approval,
// asked without a grant, with a signer to mint the grant.
func (eg *Guarded) needsHuman(call guard.Call, res *guard.Result) bool {
	if res.Code != guard.CodeApprovalRequired || call.Approval != "" || eg.opts.Signer == nil ||
		eg.opts.NoInterrupt && eg.opts.Approver == nil {
		return false
	}
	t := eg.g.Tools().Lookup(call.Proposal.Name)
	return t != nil && t.Spec().Effect == guard.Write && t.Spec().NeedsApproval
}

// grant mints and signs the grant of a human's yes to the request: bound
// to exactly its principal and proposal.
func (eg *Guarded) grant(req agentloop.ApprovalRequest, approver string) (string, error) {
	if approver == "" {
		approver = "human"
	}
	g := guard.NewGrant(req.Principal, guard.Proposal{Name: req.Tool, Arguments: req.Arguments}, approver, eg.opts.Clock.Now(), eg.opts.GrantTTL)
	return eg.opts.Signer.Sign(g)
}

// request describes the call for a human: the operation the guard will run
// it as, so that the request names what the grant pays for.
func (eg *Guarded) request(call guard.Call) agentloop.ApprovalRequest {
	args := sortedJSON(call.Proposal.Arguments)
	return agentloop.ApprovalRequest{RunID: call.Context.Scope, CallID: call.Context.CallID, Tool: call.Proposal.Name,
		Arguments: json.RawMessage(args), Principal: call.Principal, Fingerprint: guard.Fingerprint(call.Proposal.Name, args),
		OperationID: eg.g.OperationID(call)}
}

// sortedJSON returns JSON arguments compact, with their object members
// sorted and numbers as written, for a human to read; arguments that are
// not JSON are returned as they are. The fingerprint, which binds the
// grant, is the guard's canonical one whatever the spelling.
func sortedJSON(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return raw
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
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
	req := eg.request(*call)
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
			eg.denials.add(req)
		}
		return denied(d.Reason).String(), nil
	}
	if eg.opts.Signer == nil {
		return "", errors.New("tgeino: a run resumed with an approval needs Options.Signer")
	}
	call.Approval, err = eg.grant(req, d.Approver)
	return "", err
}

// denials remembers, in this process, the intents humans declined, per
// principal and scope. It is bounded: when full it forgets everything, and
// a forgotten denial is asked again.
type denials struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

const maxDenials = 4096

func newDenials() *denials { return &denials{seen: map[string]struct{}{}} }

func denialKey(r agentloop.ApprovalRequest) string {
	b, _ := json.Marshal([4]string{r.Principal.TenantID, r.Principal.SubjectID, r.RunID, r.Fingerprint})
	return string(b)
}

func (d *denials) add(r agentloop.ApprovalRequest) {
	if r.RunID == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) >= maxDenials {
		clear(d.seen)
	}
	d.seen[denialKey(r)] = struct{}{}
}

func (d *denials) has(r agentloop.ApprovalRequest) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.seen[denialKey(r)]
	return ok
}
