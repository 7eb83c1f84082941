package guard

import (
	"context"
	"encoding/json"
)

// QueryStatus answers a status query for an earlier operation of the same
// principal, the recovery the contract prescribes for OUTCOME_UNKNOWN:
//
//   - a stored result is returned again as local_replay;
//   - an operation still running is IN_PROGRESS;
//   - an unknown outcome (or a reservation whose holder died) is settled by
//     the tool's receipt lookup: found, the result is stored and returned as
//     receipt_reconciled; lookup unavailable or inconclusive (no receipt is
//     inconclusive too, as the original request may still be in flight), it
//     stays OUTCOME_UNKNOWN;
//   - an operation this principal never ran is NOT_FOUND, whoever else ran
//     one of that id.
//
// Every query is audited. The error is for the host only, as for Dispatch.
func (g *Guard) QueryStatus(ctx context.Context, sc StatusCall) (*Result, error) {
	return g.status(ctx, &sc)
}

func (g *Guard) queryStatus(ctx context.Context, sc *StatusCall) (*Result, error) {
	if err := sc.Principal.Validate(); err != nil {
		return nil, err
	}
	inv := &Invocation{
		Principal: sc.Principal,
		Proposal:  Proposal{Name: sc.Tool},
		Context:   sc.Context,
		Now:       g.opts.Clock.Now(),
		opID:      sc.OperationID,
	}
	e := g.entry(inv, "query_status")
	e.AuditBody = auditBody("query_status", inv)
	answer, pending, err := g.store.Status(ctx, e)
	if err != nil {
		return storeUnavailable(), nil
	}
	if answer != nil {
		return answer, nil
	}
	inv.Proposal.Name = pending.Tool
	inv.Fingerprint = pending.Fingerprint
	inv.idemKey = pending.IdempotencyKey
	inv.IdempotencyKey = downstreamKey(inv.Principal, pending.IdempotencyKey)
	e.Tool, e.Fingerprint, e.IdempotencyKey = pending.Tool, pending.Fingerprint, pending.IdempotencyKey
	e.AuditBody = auditBody("query_status", inv)

	var (
		found bool
		data  json.RawMessage
	)
	if tool := g.tools.Lookup(pending.Tool); tool != nil {
		inv.tool = tool
		_ = safeRun(func() error {
			var rerr error
			data, found, rerr = tool.LookupReceipt(ctx, inv)
			if rerr != nil {
				found = false
			}
			return nil
		})
	}
	if found && len(data) == 0 {
		data = json.RawMessage("null")
	}
	res, err := g.store.Settle(context.WithoutCancel(ctx), e, pending, found, data)
	if err != nil {
		return &Result{Code: OutcomeUnknown, Delivery: DeliveryFresh,
			Message: OutcomeUnknown.DefaultMessage(), OperationID: sc.OperationID}, nil
	}
	return res, nil
}
