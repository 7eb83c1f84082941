package guard

import (
	"errors"
	"time"
)

// This file names what an operator handles when no one knows a write's
// outcome: the writes a store lists as unsettled, the verdict that settles
// one, and the errors a store's Resolve refuses a verdict with. The stores
// that keep records an operator can settle (idem, pgstore) list them with
// their Unsettled method and settle them with Resolve; cmd/toolctl is the
// command line for both.

// UnsettledState says why an operation is unsettled.
type UnsettledState string

// The states an Unsettled write is in.
const (
	// StateUnknown: the write's outcome is unknown (OUTCOME_UNKNOWN), and
	// no status query has settled it from a receipt.
	StateUnknown UnsettledState = "unknown"
	// StateStuck: the write is still reserved but its holder's lease has
	// run out: the holder died, or is alive and late.
	StateStuck UnsettledState = "stuck"
)

// Unsettled is one write whose outcome is unknown or stuck, as stored in
// its idempotency record.
type Unsettled struct {
	TenantID  string
	SubjectID string
	// IdempotencyKey is the record's effective key ("k:" and the caller's
	// key, or "o:" and the operation id): with the subject it names the
	// record for a Resolution.
	IdempotencyKey string
	OperationID    string
	Tool           string
	CallID         string
	Fingerprint    string
	State          UnsettledState
	// LeaseExpiry is when a stuck reservation's lease ran out, on the
	// guard's clock; zero for an unknown outcome.
	LeaseExpiry time.Time
	// Record is where the store keeps the record, for an operator who
	// looks at it there (idem: its Redis key); empty where the store has
	// no such name (pgstore: a row of its records table).
	Record string
}

// Resolution is an operator's verdict on one unsettled write, for a
// store's Resolve.
type Resolution struct {
	TenantID  string
	SubjectID string
	// IdempotencyKey names the record, as Unsettled lists it; or, when it
	// is empty, OperationID names the operation whose record it is.
	IdempotencyKey string
	OperationID    string
	// Outcome is what the operator established: OutcomeCommitted (the
	// write took place; Data is its result, JSON, stored in its canonical
	// form) or OutcomeNotStarted (it did not: its key is released, so a
	// retry runs it).
	Outcome Outcome
	Data    []byte
	// Operator names who resolved it (required); it is audited.
	Operator string
	// Force resolves a reservation whose lease has not run out yet: its
	// holder may still be running.
	Force bool
	// Now is the time of the resolution, on the guard's clock: the audit
	// record's time, and what a lease is compared with.
	Now time.Time
}

// Errors a store's Resolve returns when it refuses a resolution, wrapped
// with the store's name and the details; errors.Is finds them whichever
// store refused.
var (
	// ErrNoRecord: no idempotency record of that key or operation, or it
	// was released: there is nothing to resolve.
	ErrNoRecord = errors.New("no unsettled record")
	// ErrAlreadyCommitted: the record holds a committed result, which an
	// operator never overwrites.
	ErrAlreadyCommitted = errors.New("the operation is already committed")
	// ErrLeaseActive: the record is reserved and its lease has not run
	// out: its holder may still commit. Resolution.Force overrides it.
	ErrLeaseActive = errors.New("the operation is in progress (its lease has not expired)")
	// ErrRecordChanged: the record changed while it was being resolved.
	// Nothing was resolved; list and try again.
	ErrRecordChanged = errors.New("the record changed meanwhile; nothing was resolved")
)
