package guard

import (
	"context"
	"errors"
	"time"
)

// Store keeps call-id bindings, idempotency records, results and the audit
// log, and makes each state change atomic together with its audit record.
// Package idem implements it on Redis; guard/guardtest is the conformance
// suite for other implementations.
//
// Every method takes the outcome the guard computed and returns the result
// the model must see, which may differ: the store applies the first two
// checks of the contract (call id binding, idempotency key) atomically, so a
// conflict or a stored result wins over the fresh outcome.
//
// A store returns an error only when it could not do its job (unreachable,
// timed out); the guard reports that as UNAVAILABLE, or as OUTCOME_UNKNOWN
// after a write ran.
type Store interface {
	// Finish records a dispatch that reserved nothing: one that failed a
	// check, or a read that ran. In one atomic step it applies the call
	// id and idempotency key checks, binds the call id (with the result if
	// it is terminal), binds an explicit idempotency key of a read to its
	// OK result, and appends the audit record.
	Finish(ctx context.Context, e *Entry) (*Result, error)
	// Reserve applies the call id and idempotency key checks for a write
	// about to execute. If they decide the answer (a replay, a conflict,
	// an unknown outcome, in progress) it is returned, audited, and the
	// write must not run. Otherwise the call id is bound, the key is
	// reserved until e.Now+lease, and a non-empty token is returned.
	Reserve(ctx context.Context, e *Entry, lease time.Duration) (answer *Result, token string, err error)
	// Commit stores the outcome of the write reserved with token, with
	// its audit record. OK commits the result; OUTCOME_UNKNOWN marks the
	// record unknown; a not-started outcome frees the key. If the record
	// was settled meanwhile, the settled result is kept and returned.
	Commit(ctx context.Context, e *Entry, token string) (*Result, error)
	// Status answers a status query from the stored state when it can (a
	// stored result, in progress, not found), audited. For an unknown
	// outcome, or a reservation whose lease expired before e.Now (which
	// becomes unknown), it returns a Pending for the guard to ask the
	// tool's receipt lookup, and audits nothing yet.
	Status(ctx context.Context, q *Entry) (*Result, *Pending, error)
	// Settle ends a status query that returned Pending: with found, the
	// receipt's data is committed and returned as receipt_reconciled;
	// without, OUTCOME_UNKNOWN again. Either way it is audited.
	Settle(ctx context.Context, q *Entry, p *Pending, found bool, data []byte) (*Result, error)
	// Audit returns up to limit audit records of the tenant with sequence
	// numbers greater than after, in order, and the tenant's chain head.
	Audit(ctx context.Context, tenantID string, after int64, limit int) ([]AuditRecord, AuditHead, error)
}

// Entry is one state change for the store: who, which call, which intent,
// the outcome the guard computed, and the audit body to append.
type Entry struct {
	TenantID  string
	SubjectID string
	CallID    string // "" when the provider gave none: no binding
	// OperationID names the operation for status queries.
	OperationID string
	// IdempotencyKey is the effective key: "k:" and the context's key, or
	// for a write without one "o:" and the operation id; "" for a read
	// without a key.
	IdempotencyKey string
	Tool           string
	Fingerprint    string
	Effect         Effect
	Now            time.Time

	// The outcome the guard computed.
	Code       Code
	Data       []byte
	Message    string
	RetryAfter time.Duration
	SideEffect SideEffect

	// AuditBody is the canonical JSON of the audit record's fixed part.
	AuditBody []byte

	inv    *Invocation
	action string
}

// Pending is an operation whose outcome is unknown, as Status found it.
type Pending struct {
	Tool           string
	IdempotencyKey string // the effective key of the operation
	Fingerprint    string
	CallID         string
	OperationID    string
}

// ErrStoreClosed may be returned by stores used after Close.
var ErrStoreClosed = errors.New("guard: store closed")
