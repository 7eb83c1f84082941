package guard

import (
	"context"
	"errors"
	"time"
)

// Store keeps call-id bindings, idempotency records, results and the audit
// log, and makes each state change atomic together with its audit record.
// Reading the log back is AuditLog's (auditlog.go), which stores
// implement beside this interface.
// Package idem implements it on Redis and package memstore in memory (the
// readable reference: its doc lists every rule as a numbered list);
// guard/guardtest is the conformance suite for other implementations.
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
	// write must not run. Then, for an entry with a GrantID, a grant that
	// another operation spent is APPROVAL_INVALID (GrantUsedMessage),
	// audited, and the write must not run. Then, for an entry with a
	// Charge (on a Budgeter), a bound without room is BUDGET_EXHAUSTED,
	// audited, and the write must not run. Otherwise it returns nil: the
	// grant is spent on this operation, the charge taken under e.Token,
	// the call id is bound and the key is reserved under e.Token until
	// e.Now+lease. A store that knows it lost records of the tenant (idem:
	// Redis evicted them, and an operator acknowledged it) and finds no
	// record of the key sets e.MayBeLost.
	//
	// Reserve is idempotent per token: sent again with the same e.Token
	// (a client retry after a lost reply, or a durable step run again
	// after its process died: Call.Step) it returns nil again and changes
	// nothing; after the token's reservation was released (Commit with a
	// not-started code) or committed, it answers UNAVAILABLE, unaudited
	// (nobody waits for that answer), so a late copy cannot reserve the key
	// again.
	//
	// When it returns nil having made the reservation now, it sets
	// e.Reserved; a copy that found its token's reservation standing
	// leaves it false, so that the guard knows the holder may have run
	// the write already.
	Reserve(ctx context.Context, e *Entry, lease time.Duration) (answer *Result, err error)
	// Commit stores the outcome of the write reserved under e.Token, with
	// its audit record, appended first so that no result is ever stored
	// without it. OK commits the result; OUTCOME_UNKNOWN marks the record
	// unknown; a not-started outcome (TIMEOUT_BEFORE_EXECUTE, RATE_LIMIT,
	// UNAVAILABLE) releases the key. The reservation's budget charge
	// (Budgeter) is given back when e.SideEffect is none, and kept
	// otherwise. If the record was settled meanwhile,
	// the settled result is kept and returned. A commit applied once and
	// sent again with the same token changes nothing and answers the same.
	Commit(ctx context.Context, e *Entry) (*Result, error)
	// Status answers a status query from the stored state when it can (a
	// stored result, in progress, not found), audited. For an unknown
	// outcome, or a reservation whose lease expired before e.Now (which
	// becomes unknown), it returns a Pending for the guard to ask the
	// tool's receipt lookup, and audits nothing yet. When nothing is
	// stored for the operation but the query names a tool and an
	// idempotency key (q.Tool, q.IdempotencyKey), the record may have been
	// lost: it returns a Pending with Lost set, so the receipt is asked
	// before the answer is NOT_FOUND.
	Status(ctx context.Context, q *Entry) (*Result, *Pending, error)
	// Settle ends a status query that returned Pending, with what the
	// receipt lookup said. The store finds the operation again (its state
	// may have changed since Status) and answers from what it finds:
	//   - ReceiptFound: the data is committed (unless p.Lost: then only
	//     answered) and returned as receipt_reconciled;
	//   - ReceiptAbsent once the reservation's lease has expired (or
	//     p.Lost): the operation did not take place; its key is released
	//     and the answer is NOT_FOUND;
	//   - otherwise OUTCOME_UNKNOWN again.
	// Either way it is audited.
	Settle(ctx context.Context, q *Entry, p *Pending, r Receipt, data []byte) (*Result, error)
}

// TxStore is a Store whose database can hold a write's effect: a tool
// declared Transactional (ToolSpec) writes rows in the store's own
// transaction, and they commit with the write's outcome and audit record,
// or not at all (package pgstore is one; idem and memstore are not, and a
// transactional tool does not run on them). The guard calls RunTx instead
// of Reserve, the tool and Commit.
type TxStore interface {
	Store
	// RunTx does in one transaction of the store what Reserve, the tool
	// and Commit do for other writes. It applies Reserve's checks and
	// reserves e's key under e.Token (Reserve's rules: an answer they
	// decide is returned, audited, and run is not called); then it calls
	// run with a context that carries the transaction for the tool (the
	// store's own way: pgstore.WriteTx's function receives it), and run
	// leaves the outcome in e; then it stores that outcome as Commit does
	// and commits the transaction. A write whose outcome is not OK leaves
	// no row of the tool's. The key stays locked until the transaction
	// ends: a concurrent call of the same key waits for it, then replays
	// its result; a status query of the operation waits for it too.
	//
	// A crash before the commit leaves nothing of the write (no row, no
	// reservation: a retry runs it), a crash after leaves all of it (a
	// retry replays), so RunTx never answers OUTCOME_UNKNOWN: a commit
	// whose reply was lost is settled by asking the database whether the
	// transaction committed, and one it cannot settle in time is answered
	// IN_PROGRESS (a retry or a status query decides). It returns an error
	// only when nothing was committed; the guard answers UNAVAILABLE.
	RunTx(ctx context.Context, e *Entry, lease time.Duration, run func(ctx context.Context)) (*Result, error)
}

// ErrStoreRefused is wrapped by the error of a store that refuses to work
// with its server as configured (package idem: an eviction policy, too few
// replicas): it sent nothing, stored nothing, and asked again now it would
// refuse the same way. The guard answers UNAVAILABLE at once, without the
// release and commit retries it makes after an error that may pass.
var ErrStoreRefused = errors.New("guard: the store refuses its server's configuration")

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

	// AuditBody is the JSON of the audit record's fixed part: AuditBody's
	// fields in declared order (not sorted), hashed as stored.
	AuditBody []byte
	// Token names a write's reservation: chosen by the guard, unique per
	// dispatch (per durable step and key with Call.Step), the same for the
	// Reserve and Commit of one write.
	Token string
	// Reserved is set by a Reserve that returned nil having made the
	// reservation now; it stays false when Reserve found the reservation
	// already standing under Token (its copy, or the same durable step
	// run again). The guard never sets it.
	Reserved bool
	// GrantID is the id of the approval grant that approved this write,
	// "" when none did; GrantExpiresAt is when the grant expires. A grant
	// pays for one execution: Reserve spends it on the entry's operation
	// (its effective IdempotencyKey) in the same atomic step as the
	// reservation, and refuses it to every other operation with
	// APPROVAL_INVALID and GrantUsedMessage, at least until GrantExpiresAt
	// plus GrantSkew. A Commit that releases the reservation (a
	// not-started outcome) gives the grant back.
	GrantID        string
	GrantExpiresAt time.Time
	// Charge is a write's budget charge (Budgeter), nil when no budget
	// applies: its Reserve takes it under Token, its Commit settles it.
	Charge *BudgetCharge
	// MayBeLost is set by a Reserve that reserved the key but found no
	// record of it in a tenant whose records the store lost: the write may
	// have run before. The guard asks the tool's receipt lookup before it
	// runs; unless the receipt is absent, nothing runs and the outcome is
	// OUTCOME_UNKNOWN with MayBeLostMessage, committed as unknown (side
	// effect none) for a status query or an operator to settle.
	MayBeLost bool

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
	// Lost is set when no record was found and the query's own tool and
	// key were used: the record may have been lost with the store's data.
	Lost bool
}

// Receipt is what a tool's receipt lookup said about a pending operation.
type Receipt uint8

const (
	// ReceiptInconclusive: the lookup failed, or the tool has none.
	ReceiptInconclusive Receipt = iota
	// ReceiptFound: the downstream system has the operation's result.
	ReceiptFound
	// ReceiptAbsent: the downstream system answered that it has no
	// operation under the key. Since a re-execution reuses the same
	// downstream key, a late arrival of the first attempt is deduplicated
	// downstream; so once the lease has expired, absent means the
	// operation may run (docs/contract.md, "Unknown outcomes").
	ReceiptAbsent
)
