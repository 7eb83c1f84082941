package durable

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/provider"
)

// defaultMaxTurns bounds the model turns of a run whose Run names none.
const defaultMaxTurns = 12

// Run is a run's input: what the workflow is started with. It holds no
// secret; the engine stores it.
type Run struct {
	// ID is the run id: the workflow id, so that every step of the run,
	// in any process, has the same scope.
	ID string `json:"id"`
	// Principal is who the run acts for, from the host's session when it
	// starts the workflow; never from the model.
	Principal guard.Principal `json:"principal"`
	// Input is the user's message.
	Input string `json:"input"`
	// MaxTurns bounds the model turns; 0 means 12.
	MaxTurns int `json:"max_turns,omitempty"`
}

// Status says how a run ended.
type Status string

// The run statuses; only StatusCompleted means the model gave its final
// answer.
const (
	StatusCompleted  Status = "completed"
	StatusMaxTurns   Status = "max_turns"
	StatusIncomplete Status = "incomplete"
	StatusRefused    Status = "refused"
	StatusFailed     Status = "failed"
)

// Result is the end of a run: the workflow's output.
type Result struct {
	RunID  string `json:"run_id"`
	Status Status `json:"status"`
	// Reason is the provider's word for an ending other than completed.
	Reason string `json:"reason,omitempty"`
	// Output is the model's final text.
	Output string `json:"output"`
	Turns  int    `json:"turns"`
	// Calls are the run's tool calls in order, with their model results'
	// codes.
	Calls []CallRecord `json:"calls"`
}

// CallRecord is one tool call of a run and how it was answered.
type CallRecord struct {
	Turn     int    `json:"turn"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Code     string `json:"code"`
	Delivery string `json:"delivery"`
	// Asked reports whether a human was asked about it.
	Asked bool `json:"asked,omitempty"`
}

// Steps is what an engine gives Drive: each method a step the engine
// records, so that a workflow replayed after a crash gets the recorded
// answer instead of running it again, and runs again only a step whose
// answer it never recorded. An error ends the run (the engine's own
// retries of a step happen inside it).
type Steps interface {
	// Turn asks the model for one reply (Runner.Turn, in a worker).
	Turn(in TurnInput) (TurnOutput, error)
	// Dispatch answers one tool call (Runner.Dispatch, in a worker).
	Dispatch(in DispatchInput) (DispatchOutput, error)
	// Approve waits, durably, for a human's decision on req: the engine
	// publishes req where the host's approvers find it, and the decision
	// comes from another process (a DBOS message, a Temporal signal).
	Approve(req host.ApprovalRequest) (host.Decision, error)
}

// TurnInput is one model turn's input.
type TurnInput struct {
	RunID string `json:"run_id"`
	Turn  int    `json:"turn"`
	// Input, on the first turn, is the user's message.
	Input string `json:"input,omitempty"`
	// Items is the conversation so far, in the provider's wire format
	// (with Chain, what came after it).
	Items []json.RawMessage `json:"items,omitempty"`
	Chain string            `json:"chain,omitempty"`
	// Outputs answer the previous reply's calls.
	Outputs []provider.Output `json:"outputs,omitempty"`
}

// TurnOutput is one model turn's reply, as the engine records it.
type TurnOutput struct {
	// Sent is the conversation the turn sent (Items with the user's
	// message or the outputs added).
	Sent  []json.RawMessage `json:"sent,omitempty"`
	ID    string            `json:"id"`
	Text  string            `json:"text,omitempty"`
	Calls []Call            `json:"calls,omitempty"`
	Items []json.RawMessage `json:"items,omitempty"`
	Chain string            `json:"chain,omitempty"`
	End   provider.Ending   `json:"end,omitempty"`
	// Reason is the provider's word for an ending other than normal;
	// Error, for a failed reply, the API's message.
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
	Continue bool   `json:"continue,omitempty"`
}

// Call is one tool call of a reply.
type Call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Kind      string `json:"kind,omitempty"`
	// Answer, when set, is the model result the call gets without being
	// dispatched (provider.ToolCall.Answer), as JSON.
	Answer json.RawMessage `json:"answer,omitempty"`
}

// DispatchInput is one tool call to dispatch, or to decide.
type DispatchInput struct {
	RunID      string          `json:"run_id"`
	Principal  guard.Principal `json:"principal"`
	ResponseID string          `json:"response_id"`
	Call       Call            `json:"call"`
	// Decision, with Pending, is a human's answer to the question the
	// call's earlier dispatch asked (DispatchOutput.Ask).
	Decision *host.Decision `json:"decision,omitempty"`
	Pending  *host.Pending  `json:"pending,omitempty"`
	// Step is the engine's id of the step that runs this dispatch (a DBOS
	// step id, a Temporal activity id), the same each time the engine
	// runs the step again: the guard's Call.Step is the run id and it, so
	// the step owns its write's reservation. The engine's
	// module sets it inside the step; "" takes the call's id and whether
	// it carries a decision instead, which is as stable but relies on the
	// provider's call ids being unique in the run.
	Step string `json:"step,omitempty"`
}

// QuestionID is the id of the question req asks a human: the same each
// time an engine asks it again (a run recovered after a crash, a
// notification retried) and another for every other question, of this
// run or another. A notifier uses it as its idempotency key (a chat
// message's client id, an e-mail's Message-ID, an inbox row's key), so
// that the one notification an engine may repeat (its process died
// between the send and the record of it) reaches the approvers once.
func QuestionID(req host.ApprovalRequest) string {
	h := sha256.New()
	for _, f := range [...]string{req.Principal.TenantID, req.Principal.SubjectID, req.RunID, req.CallID, req.OperationID, req.Fingerprint} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return "q_" + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// DispatchOutput is one tool call's answer: a model result, or a question
// for a human.
type DispatchOutput struct {
	// Result is the tool-model-result-v2 JSON; empty when Ask is set.
	Result json.RawMessage       `json:"result,omitempty"`
	Ask    *host.ApprovalRequest `json:"ask,omitempty"`
}

// ErrBadStep is Drive's error for a step whose answer makes no sense (a
// dispatch that neither answered nor asked): the engine's recorded state
// does not belong to this code.
var ErrBadStep = errors.New("durable: a step's recorded answer is not one this run can use")

// Drive is a workflow's body: it runs the model's turns and the tool
// calls of each reply, one after another, in order, through s, until the
// model gives its final answer, the turn limit, or a reply that did not
// end normally. It is deterministic: given the same recorded answers it
// takes the same steps, as engines that replay a workflow require.
func Drive(s Steps, run Run) (*Result, error) {
	maxTurns := run.MaxTurns
	if maxTurns <= 0 {
		maxTurns = defaultMaxTurns
	}
	res := &Result{RunID: run.ID, Calls: []CallRecord{}}
	in := TurnInput{RunID: run.ID, Input: run.Input}
	for {
		if res.Turns >= maxTurns {
			res.Status = StatusMaxTurns
			return res, nil
		}
		in.Turn = res.Turns
		out, err := s.Turn(in)
		if err != nil {
			return res, fmt.Errorf("durable: turn %d: %w", res.Turns+1, err)
		}
		res.Turns++
		in = TurnInput{RunID: run.ID, Chain: out.Chain}
		if out.Chain == "" {
			in.Items = append(append([]json.RawMessage(nil), out.Sent...), out.Items...)
		}
		if out.End != provider.EndNormal {
			res.Status, res.Reason, res.Output = Status(out.End), out.Reason, out.Text
			if out.End == provider.EndFailed {
				return res, fmt.Errorf("durable: turn %d failed: %s: %s", res.Turns, out.Reason, out.Error)
			}
			return res, nil
		}
		if out.Continue {
			continue
		}
		if len(out.Calls) == 0 {
			res.Status, res.Output = StatusCompleted, out.Text
			return res, nil
		}
		for _, c := range out.Calls {
			result, asked, err := answer(s, run, out.ID, c)
			if err != nil {
				return res, fmt.Errorf("durable: turn %d, call %s: %w", res.Turns, c.ID, err)
			}
			var r guard.Result
			if err := r.UnmarshalJSON(result); err != nil {
				return res, fmt.Errorf("%w: call %s: %v", ErrBadStep, c.ID, err)
			}
			res.Calls = append(res.Calls, CallRecord{Turn: res.Turns, CallID: c.ID, Tool: c.Name, Code: r.Code.String(),
				Delivery: string(r.Delivery), Asked: asked})
			in.Outputs = append(in.Outputs, provider.Output{CallID: c.ID, Name: c.Name, Kind: c.Kind, Result: string(result), OK: r.Code == guard.CodeOK})
		}
	}
}

// answer is one call's model result: the reply's own answer, or a
// dispatch, and a human's decision where the dispatch asks for one.
func answer(s Steps, run Run, respID string, c Call) (result json.RawMessage, asked bool, err error) {
	if len(c.Answer) > 0 {
		return c.Answer, false, nil
	}
	in := DispatchInput{RunID: run.ID, Principal: run.Principal, ResponseID: respID, Call: c}
	out, err := s.Dispatch(in)
	if err != nil {
		return nil, false, err
	}
	if out.Ask == nil {
		if len(out.Result) == 0 {
			return nil, false, ErrBadStep
		}
		return out.Result, false, nil
	}
	d, err := s.Approve(*out.Ask)
	if err != nil {
		return nil, true, err
	}
	pending := host.PendingOf(*out.Ask)
	in.Decision, in.Pending = &d, &pending
	if out, err = s.Dispatch(in); err != nil {
		return nil, true, err
	}
	if out.Ask != nil || len(out.Result) == 0 {
		return nil, true, ErrBadStep
	}
	return out.Result, true, nil
}

// Answer is a human's decision sent to a run that waits on a question
// (Steps.Approve): the question's ids, and the decision. An engine's
// module carries it as the engine's message (a DBOS message, a Temporal
// signal), in this JSON; a run drops an answer to another question
// (Answers), so that a late or mistaken answer decides nothing.
type Answer struct {
	OperationID string        `json:"operation_id"`
	CallID      string        `json:"call_id"`
	Fingerprint string        `json:"fingerprint"`
	Decision    host.Decision `json:"decision"`
}

// AnswerTo is the answer to req with d.
func AnswerTo(req host.ApprovalRequest, d host.Decision) Answer {
	return Answer{OperationID: req.OperationID, CallID: req.CallID, Fingerprint: req.Fingerprint, Decision: d}
}

// Answers reports whether a is the answer to req.
func (a Answer) Answers(req host.ApprovalRequest) bool {
	return a.OperationID == req.OperationID && a.CallID == req.CallID && a.Fingerprint == req.Fingerprint
}
