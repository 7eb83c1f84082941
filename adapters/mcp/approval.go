package tgmcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
)

// canElicit reports whether the server may ask the client's human: it has a
// signer to mint grants with, and the client declared elicitation (in
// initialize, or in the request's own capabilities on 2026-07-28).
func (s *Server) canElicit(req *sdk.CallToolRequest) bool {
	if s.sealer == nil || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// approveSchema is the form the human answers: one boolean.
var approveSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve","description":"Run this action once."}},"required":["approve"]}`)

// approvalInput labels the approval question among a call's input requests.
const approvalInput = "toolguard_approval"

// answerRetention is how long an answer is kept after its question
// expired: a call answered in time and sent again within it (its response
// was lost) replays its execution; after it, the same request state is
// answered as expired, and the operation's outcome is the status tool's to
// tell.
const answerRetention = 24 * time.Hour

// newQuestion returns the question of a call that needs approval: who
// asks, about what, the operation the call will run as (opOf), and until
// when an answer is taken.
func (s *Server) newQuestion(call guard.Call) *question {
	var id [16]byte
	_, _ = rand.Read(id[:])
	op := s.opOf(call)
	return &question{
		ID:             hex.EncodeToString(id[:]),
		TenantID:       call.Principal.TenantID,
		SubjectID:      call.Principal.SubjectID,
		Tool:           call.Proposal.Name,
		Fingerprint:    guard.Fingerprint(call.Proposal.Name, call.Proposal.Arguments),
		OperationID:    op.OperationID,
		IdempotencyKey: op.IdempotencyKey,
		Scope:          call.Context.Scope,
		Expires:        s.opts.Clock.Now().Add(s.opts.QuestionTTL).UnixMilli(),
	}
}

// approvalRequest is the elicitation that puts a call to its human: the
// tool, its arguments, what it does.
func (s *Server) approvalRequest(call guard.Call) *sdk.ElicitParams {
	what := ""
	if t := s.tools[call.Proposal.Name]; t != nil {
		what = t.Description()
	}
	msg := fmt.Sprintf("Approve %s with arguments %s?\n%s\nIf you approve, it runs once, for you.",
		call.Proposal.Name, compactJSON(call.Proposal.Arguments), what)
	return &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approveSchema}
}

// ask returns the input-required result that puts the call to the client's
// human, with the sealed question as its request state. The go-sdk carries
// it as a multi round-trip request on protocol 2026-07-28 and later, and as
// an elicitation/create request to the client on earlier versions; either
// way the call comes back with the answer and the request state, to any
// replica. Nothing is stored until the answer comes.
func (s *Server) ask(call guard.Call) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{approvalInput: s.approvalRequest(call)},
		RequestState:  s.sealer.seal(s.newQuestion(call)),
	}
}

// The JSON-RPC errors of a request state the server refuses: each says
// why in its message and in data.type, and none asks the human again.
var (
	errStateAnswered = stateError("request_state_answered",
		"the request state was answered already, with another answer: a question is answered once; call the tool again to be asked again")
	errStateOtherCall = stateError("request_state_other_call",
		"the request state answers a question about another call (another tool or other arguments)")
	errStateOtherOperation = stateError("request_state_other_operation",
		"the request state answers a question about another operation (another idempotency key, operation id or scope)")
	errStateNoAnswer = stateError("request_state_no_answer",
		"the request state came without inputResponses["+approvalInput+"], the answer to its question")
	errStateInvalid = stateError("request_state_invalid", errBadState.Error()[len("mcp: "):])
)

// stateError is an invalid-params error with data {"type": typ}.
func stateError(typ, msg string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"type": typ})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg, Data: data}
}

// answer dispatches a call that comes back with its human's answer and the
// request state of its question, on whichever replica it reaches. The
// state must be one a replica sealed for this principal and this call (its
// tool and arguments), and the call is run as the operation the state
// names. The answer is stored once, in the StateStore, under the
// question's id: the same answer sent again (a response that was lost, a
// POST delivered twice) goes on as the first did, so the guard replays the
// operation's execution; another answer is refused. A yes mints a grant
// approved by the principal, whose id is the question's, and dispatches
// with it; a no is APPROVAL_REQUIRED with guard.DeclinedMessage; an answer after
// the question expired is guard.Expired.
func (s *Server) answer(ctx context.Context, req *sdk.CallToolRequest, call *guard.Call, named bool) (*guard.Result, error) {
	if s.sealer == nil {
		return nil, errStateInvalid
	}
	q, err := s.sealer.forPrincipal(req.Params.RequestState, call.Principal)
	if err != nil {
		return nil, errStateInvalid
	}
	if q.Tool != call.Proposal.Name || q.Fingerprint != guard.Fingerprint(call.Proposal.Name, call.Proposal.Arguments) {
		return nil, errStateOtherCall
	}
	if !s.bindOperation(q, call, named) {
		return nil, errStateOtherOperation
	}
	resp, ok := req.Params.InputResponses[approvalInput]
	if !ok {
		return nil, errStateNoAnswer
	}
	ans := answerNo
	if r, _ := resp.(*sdk.ElicitResult); r != nil && r.Action == "accept" && r.Content["approve"] == true {
		ans = answerYes
	}
	got, expired, err := s.recordAnswer(ctx, stateKey("answer", q.ID), q.expires(), ans)
	switch {
	case err != nil:
		return unavailable(), nil // nothing ran, nothing was recorded for sure
	case expired:
		return guard.Expired(), nil
	case got != ans:
		return nil, errStateAnswered
	case ans == answerNo:
		return guard.Declined(""), nil
	}
	tok, err := s.grant(call, q.ID)
	if err != nil {
		return nil, hostError(err)
	}
	call.Approval = tok
	return s.g.Dispatch(ctx, *call)
}

// The answers a question can get, as the StateStore keeps them.
const (
	answerYes = "yes"
	answerNo  = "no"
)

// recordAnswer stores ans as the answer of the question under key unless
// it has one, and returns the answer it has. A question past its expiry
// takes no new answer (expired); the answer it got in time stays known for
// answerRetention.
func (s *Server) recordAnswer(ctx context.Context, key string, expires time.Time, ans string) (got string, expired bool, err error) {
	now := s.opts.Clock.Now()
	if !now.Before(expires) {
		v, err := s.state.Get(ctx, key)
		if err != nil || v == nil {
			return "", err == nil, err
		}
		return string(v), false, nil
	}
	v, err := s.state.Claim(ctx, key, []byte(ans), expires.Sub(now)+answerRetention)
	return string(v), false, err
}

// grant mints and signs the grant of a human's yes to call: approved by
// the principal, whose question it was, and named after the question, so
// that a yes sent again pays for the same operation and no other.
func (s *Server) grant(call *guard.Call, questionID string) (string, error) {
	g := guard.NewGrant(call.Principal, call.Proposal, call.Principal.SubjectID, s.opts.Clock.Now(), s.opts.GrantTTL)
	g.ID = "grant_q" + questionID
	return s.opts.Signer.Sign(g)
}

// unavailable is the result of a call the server could not record an
// answer for: nothing ran; the client may send it again.
func unavailable() *guard.Result {
	return &guard.Result{Code: guard.CodeUnavailable, Delivery: guard.DeliveryFresh,
		Message: "The server could not record the answer; nothing ran. Send the call again.", RetryAfter: time.Second}
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
