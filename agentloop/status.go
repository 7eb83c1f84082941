package agentloop

import (
	"context"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// status answers a call of the built-in status tool: its arguments are
// checked against its schema like any tool's, then the guard's status query
// runs for the run's principal (never one the model names). For a write of
// this run whose outcome was unknown, the query names its tool and key, so a
// record the store lost is still settled from the tool's receipt.
func (l *Loop) status(ctx context.Context, p guard.Principal, unknown func(string) (unknownOperation, bool), c guard.ExecutionContext, args string) *guard.Result {
	in, bad := toolset.ParseStatus([]byte(args))
	if bad != nil {
		return bad
	}
	sc := in.Call(p, c)
	if u, ok := unknown(in.OperationID); ok {
		// The run's own: the loop knows its tool and key, whatever the
		// model says.
		sc.Tool, sc.Context.IdempotencyKey = u.Tool, u.IdempotencyKey
	}
	res, err := l.guard.QueryStatus(ctx, sc)
	if err != nil {
		return &guard.Result{Code: guard.CodeUnavailable, Delivery: guard.DeliveryFresh, Message: guard.CodeUnavailable.DefaultMessage()}
	}
	return res
}
