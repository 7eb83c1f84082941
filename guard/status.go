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
//     receipt_reconciled; no receipt once the reservation's lease is over,
//     the operation did not take place: its key is released and the answer
//     is NOT_FOUND (a re-execution reuses the downstream key, so a late
//     arrival of the first attempt is deduplicated downstream); lookup
//     unavailable, or no receipt while the lease holds (the request may
//     still be in flight), it stays OUTCOME_UNKNOWN;
//   - an operation this principal never ran is NOT_FOUND, whoever else ran
//     one of that id, and so is one that never started (it ended with a
//     retryable result); an idempotency key that another operation took
//     never answers for this one. When the query names a write tool
//     (StatusCall.Tool) and the store has nothing of the operation, the
//     store may have lost the record: the tool's receipt for the
//     operation's key is asked first, and found, answered as
//     receipt_reconciled. The key is Context.IdempotencyKey, the one the
//     operation ran under; without it, the key a write without one runs
//     under, and then no receipt proves nothing (the operation may have
//     had a key): the answer is OUTCOME_UNKNOWN, never "may be run again".
//   - a read is never OUTCOME_UNKNOWN: its result is stored, or it never
//     ran (NOT_FOUND); nor is a transactional write (ToolSpec.Transactional)
//     on a TxStore: its records commit with its effect, so a store that
//     has nothing of it says it did not happen (NOT_FOUND), whatever key
//     the query names.
//
// Every query is audited. The error is for the host only, as for Dispatch.
func (g *Guard) QueryStatus(ctx context.Context, sc StatusCall) (*Result, error) {
	return g.status(ctx, &sc)
}

func (g *Guard) queryStatus(ctx context.Context, sc *StatusCall) (*Result, error) {
	if err := sc.Principal.Validate(); err != nil {
		return nil, err
	}
	if err := sc.Context.validate(); err != nil {
		return nil, err
	}
	if sc.OperationID != "" && !validID(sc.OperationID) {
		return nil, ErrBadID
	}
	inv := &Invocation{
		Principal: sc.Principal,
		Proposal:  Proposal{Name: sc.Tool},
		Context:   sc.Context,
		Now:       g.opts.Clock.Now(),
		opID:      sc.OperationID,
		secrets:   g.secrets,
	}
	e := g.entry(inv, "query_status")
	guessed := false
	if t := g.tools.Lookup(sc.Tool); t != nil && t.Spec().Effect == Write {
		// The key the operation ran under, for a record the store lost: the
		// one the query names, else the key a write without one runs
		// under, which is only a guess (the operation may have had a key).
		// A read has no record to lose: it never ran, or its result is
		// stored, and it is never unknown.
		if k := sc.Context.IdempotencyKey; k != "" {
			e.IdempotencyKey = "k:" + k
		} else if sc.OperationID != "" {
			e.IdempotencyKey, guessed = "o:"+sc.OperationID, true
		}
	}
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

	tool := g.tools.Lookup(pending.Tool)
	var (
		receipt Receipt
		data    json.RawMessage
	)
	if _, tx := g.store.(TxStore); tx && pending.Lost && tool != nil && tool.Spec().Transactional {
		// A transactional write's records commit in the transaction that
		// holds its effect: where the store has none, it did not happen.
		receipt = ReceiptAbsent
	} else {
		receipt, data = lookupReceipt(ctx, tool, inv)
	}
	if pending.Lost && guessed && receipt == ReceiptAbsent && (tool == nil || !tool.Spec().Transactional) {
		// No receipt under a key the operation may not have run under
		// proves nothing: it stays unknown (contract section 5).
		receipt = ReceiptInconclusive
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.CommitTimeout)
	defer cancel()
	res, err := g.store.Settle(sctx, e, pending, receipt, data)
	if err != nil {
		return &Result{Code: CodeOutcomeUnknown, Delivery: DeliveryFresh,
			Message: CodeOutcomeUnknown.DefaultMessage(), OperationID: sc.OperationID}, nil
	}
	return res, nil
}

// lookupReceipt asks the tool's receipt lookup; a missing tool, an error or
// a panic is inconclusive.
func lookupReceipt(ctx context.Context, tool Tool, inv *Invocation) (Receipt, json.RawMessage) {
	if tool == nil {
		return ReceiptInconclusive, nil
	}
	inv.tool = tool
	var (
		found bool
		data  json.RawMessage
	)
	inv.outSecrets = nil
	if err := safeRun(func() (err error) {
		data, found, err = tool.LookupReceipt(ctx, inv)
		return err
	}); err != nil {
		return ReceiptInconclusive, nil
	}
	if !found {
		return ReceiptAbsent, nil
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	// A receipt is the tool's output: its secrets are withheld too.
	spec := tool.Spec()
	return ReceiptFound, inv.secrets.output(spec.Name, spec.SecretOutput, inv.withheld(), data)
}
