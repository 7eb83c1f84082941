package agentloop

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/toolset"
)

// StatusInput is the input of the built-in status tool.
type StatusInput struct {
	OperationID string `json:"operation_id" jsonschema:"description=The operation_id of an earlier result whose recovery was query_status."`
}

const statusDescription = "Ask for the outcome of an earlier operation whose result said recovery query_status (outcome unknown). " +
	"Call this before retrying anything whose outcome is unknown."

// statusToolDef is the status tool as it is offered to the model. The
// loop answers its calls itself (status); the declared function never runs.
func statusToolDef(name string) (toolset.Declared, error) {
	t := toolset.Read(name, statusDescription, func(context.Context, *guard.Invocation, StatusInput) (struct{}, error) {
		return struct{}{}, errors.New("agentloop: the status tool is answered by the loop")
	}, nil)

	if _, err := toolset.New(t); err != nil {
		return nil, err
	}
	return t, nil
}

// status answers a call of the built-in status tool: its arguments are
// checked against its schema like any tool's, then the guard's status query
// runs for the run's principal (never one the model names). For a write of
// this run whose outcome was unknown, the query names its tool and key, so a
// record the store lost is still settled from the tool's receipt.
func (l *Loop) status(ctx context.Context, p guard.Principal, st *State, c guard.ExecutionContext, args string) *guard.Result {
	s, _ := toolset.SchemaFor[StatusInput]()
	_, v, err := canon.Parse([]byte(args), canon.Limits{})
	if err == nil {
		err = s.Validate(v)
	}
	var in StatusInput
	if err == nil {
		err = json.Unmarshal([]byte(args), &in)
	}
	if err != nil {
		return &guard.Result{Code: guard.CodeInvalidArguments, Delivery: guard.DeliveryFresh,
			Message: `The status tool takes {"operation_id": "<id from the earlier result>"}.`}
	}
	sc := guard.StatusCall{Principal: p, OperationID: in.OperationID, Context: c}
	if u, ok := st.unknown(in.OperationID); ok {
		sc.Tool, sc.Context.IdempotencyKey = u.Tool, u.IdempotencyKey
	}
	res, err := l.guard.QueryStatus(ctx, sc)
	if err != nil {
		return &guard.Result{Code: guard.CodeUnavailable, Delivery: guard.DeliveryFresh, Message: guard.CodeUnavailable.DefaultMessage()}
	}
	return res
}
