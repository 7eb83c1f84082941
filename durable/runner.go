package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/provider"
)

// Runner is what a run's steps run, in a worker: the provider's turn, and
// the host step for a tool call. It is safe for concurrent use by the
// steps of many runs.
type Runner struct {
	// Host dispatches the tool calls (host.New over the guard and its
	// tool set). Its Principal and Scope functions are not used: a
	// durable run's principal is the one it was started for
	// (Run.Principal), and its scope is the run id. Its Call function,
	// if any, sees each call of a dispatch step (with the step's
	// context) before it is dispatched. It has no Approver (Validate): a
	// write that waits for a human is the run's durable wait
	// (Steps.Approve), not an inline call in a step.
	Host *host.Host
	// Provider is the model API.
	Provider provider.Provider
	// Instructions is the system prompt.
	Instructions string
}

// ErrInlineApprover is Validate's error for a Runner whose Host has an
// Approver.
var ErrInlineApprover = errors.New("durable: the Runner's Host has an Approver: a durable run waits for its humans itself (Steps.Approve)")

// Validate reports whether r can run an engine's steps: it has a Host and
// a Provider, and its Host no Approver (ErrInlineApprover). An engine's
// module calls it when the Runner is registered.
func (r *Runner) Validate() error {
	if r == nil || r.Host == nil || r.Provider == nil {
		return errors.New("durable: a Runner needs a Host and a Provider")
	}
	if r.Host.Options().Approver != nil {
		return ErrInlineApprover
	}
	return nil
}

// ErrProviderPanic is the error of a turn whose provider panicked: the
// step fails, and no panic reaches the engine.
var ErrProviderPanic = errors.New("durable: the provider panicked")

// Turn asks the model for one reply: the conversation so far with the
// user's message (first turn) or the previous reply's outputs added, the
// host's tools offered.
func (r *Runner) Turn(ctx context.Context, in TurnInput) (out TurnOutput, err error) {
	if r.Host == nil || r.Provider == nil {
		return out, errors.New("durable: a Runner needs a Host and a Provider")
	}
	sent := append([]json.RawMessage(nil), in.Items...)
	if in.Turn == 0 && in.Input != "" {
		sent = append(sent, r.Provider.UserItem(in.Input))
	}
	if len(in.Outputs) > 0 {
		sent = append(sent, r.Provider.OutputItems(in.Outputs)...)
	}
	rep, err := r.ask(ctx, provider.Request{Instructions: r.Instructions, Tools: r.Host.Tools(), Items: sent, Chain: in.Chain})
	if err != nil {
		return out, err
	}
	out = TurnOutput{ID: rep.ID, Text: rep.Text, Items: rep.Items, Chain: rep.Chain, End: rep.End, Reason: rep.Reason, Continue: rep.Continue}
	if rep.Chain == "" {
		out.Sent = sent
	}
	if rep.Err != nil {
		out.Error = rep.Err.Error()
	}
	for _, c := range rep.Calls {
		dc := Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Kind: c.Kind}
		if c.Answer != nil {
			dc.Answer = c.Answer.AppendJSON(nil)
		}
		out.Calls = append(out.Calls, dc)
	}
	return out, nil
}

// ask is one provider turn, with a panic turned into ErrProviderPanic.
func (r *Runner) ask(ctx context.Context, req provider.Request) (rep *provider.Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			rep, err = nil, fmt.Errorf("%w: %v", ErrProviderPanic, v)
		}
	}()
	rep, err = r.Provider.Turn(ctx, req)
	if err == nil && rep == nil {
		err = errors.New("durable: the provider returned no reply and no error")
	}
	return rep, err
}

// Dispatch answers one tool call through the host step, for the run's
// principal and in the run's scope: a model result, or (without an
// Approver) a question for a human. With a Decision it carries out the
// human's answer (host.Host.Decide). A step that runs again, after a
// crash or a retry, makes the same call in the same scope, as the same
// step (guard.Call.Step): the guard replays the stored outcome, or
// settles the reservation the step's earlier run left (doc.go, "Steps own
// their writes").
func (r *Runner) Dispatch(ctx context.Context, in DispatchInput) (DispatchOutput, error) {
	if r.Host == nil {
		return DispatchOutput{}, errors.New("durable: a Runner needs a Host")
	}
	call, err := r.Host.CallFor(ctx, in.Principal, guard.SafeID(in.RunID),
		host.Frame{Name: in.Call.Name, Arguments: []byte(in.Call.Arguments), CallID: in.Call.ID, ResponseID: in.ResponseID})
	if err != nil {
		return DispatchOutput{}, fmt.Errorf("durable: %w", err)
	}
	call.Step = stepOf(in)
	if in.Decision != nil {
		if in.Pending == nil {
			return DispatchOutput{}, errors.New("durable: a decision without the question it answers")
		}
		res, err := r.Host.Decide(ctx, call, *in.Pending, *in.Decision)
		if err != nil {
			return DispatchOutput{}, err
		}
		return DispatchOutput{Result: res.AppendJSON(nil)}, nil
	}
	a, err := r.Host.Answer(ctx, call)
	if err != nil {
		return DispatchOutput{}, err
	}
	if a.Ask != nil {
		return DispatchOutput{Ask: a.Ask}, nil
	}
	return DispatchOutput{Result: a.Result.AppendJSON(nil)}, nil
}

// stepOf is the guard's name of the step that runs in (guard.Call.Step):
// the run id and the engine's id of the step (DispatchInput.Step), or the
// call's id and phase.
func stepOf(in DispatchInput) string {
	if in.Step != "" {
		return in.RunID + "/" + in.Step
	}
	phase := "dispatch"
	if in.Decision != nil {
		phase = "decide"
	}
	return in.RunID + "/call:" + in.Call.ID + ":" + phase
}
