package tgmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
)

// DeclinedMessage is the message of the APPROVAL_REQUIRED result a call
// gets when the human in the client declined it: the same words on every
// entry point (guard.DeclinedMessage).
const DeclinedMessage = guard.DeclinedMessage

// canElicit reports whether the server may ask the client's human: it has a
// signer to mint grants with, and the client declared elicitation.
func (s *Server) canElicit(req *sdk.CallToolRequest) bool {
	if s.opts.Signer == nil || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// approveSchema is the form the human answers: one boolean.
var approveSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve","description":"Run this action once."}},"required":["approve"]}`)

// approvalInput labels the approval question among a call's input requests.
const approvalInput = "toolguard_approval"

// ask returns the input-required result that puts the call to the client's
// human (the tool, its arguments, what it does). The go-sdk carries it as a
// multi round-trip request on protocol 2026-07-28 and later, and as an
// elicitation/create request to the client on earlier versions; either way
// the call comes back with the answer and the request state.
func (s *Server) ask(call guard.Call) *sdk.CallToolResult {
	what := ""
	if t := s.tools[call.Proposal.Name]; t != nil {
		what = t.Description()
	}
	msg := fmt.Sprintf("Approve %s with arguments %s?\n%s\nIf you approve, it runs once, for you.",
		call.Proposal.Name, compactJSON(call.Proposal.Arguments), what)
	state := s.pending.put(call.Principal, guard.Fingerprint(call.Proposal.Name, call.Proposal.Arguments), s.opts.Clock.Now().Add(s.opts.GrantTTL))
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{approvalInput: &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approveSchema}},
		RequestState:  state,
	}
}

// answer dispatches a call that comes back with its human's answer. The
// request state must be one this server issued, for this principal and
// intent, and not yet used; otherwise the answer is ignored and the call is
// dispatched as if there were none. A yes mints a grant approved by the
// session's user; anything else is a denial.
func (s *Server) answer(ctx context.Context, req *sdk.CallToolRequest, call guard.Call) (*guard.Result, bool, error) {
	resp, ok := req.Params.InputResponses[approvalInput]
	if !ok || !s.pending.take(req.Params.RequestState, call.Principal,
		guard.Fingerprint(call.Proposal.Name, call.Proposal.Arguments), s.opts.Clock.Now()) {
		return nil, false, nil
	}
	ans, _ := resp.(*sdk.ElicitResult)
	if ans == nil || ans.Action != "accept" || ans.Content["approve"] != true {
		return &guard.Result{Code: guard.CodeApprovalRequired, Delivery: guard.DeliveryFresh, Message: DeclinedMessage}, true, nil
	}
	grant := guard.NewGrant(call.Principal, call.Proposal, call.Principal.SubjectID, s.opts.Clock.Now(), s.opts.GrantTTL)
	tok, err := s.opts.Signer.Sign(grant)
	if err != nil {
		return nil, false, nil
	}
	call.Approval = tok
	res, err := s.g.Dispatch(ctx, call)
	return res, true, err
}

// maxPending bounds the questions awaiting an answer; the oldest go first.
const maxPending = 10000

// pendingSet holds the questions put to humans, by request state, until
// answered or expired.
type pendingSet struct {
	mu    sync.Mutex
	byID  map[string]pendingQ
	order []string
}

type pendingQ struct {
	p           guard.Principal
	fingerprint string
	expires     time.Time
}

func (ps *pendingSet) put(p guard.Principal, fp string, expires time.Time) string {
	id := newNonce()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byID == nil {
		ps.byID = map[string]pendingQ{}
	}
	for len(ps.order) >= maxPending {
		delete(ps.byID, ps.order[0])
		ps.order = ps.order[1:]
	}
	ps.byID[id] = pendingQ{p: p, fingerprint: fp, expires: expires}
	ps.order = append(ps.order, id)
	return id
}

func (ps *pendingSet) take(id string, p guard.Principal, fp string, now time.Time) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	q, ok := ps.byID[id]
	if !ok {
		return false
	}
	delete(ps.byID, id)
	return q.p.TenantID == p.TenantID && q.p.SubjectID == p.SubjectID && q.fingerprint == fp && now.Before(q.expires)
}

// compactJSON returns the arguments without white space, or as they came
// when they are not JSON.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
