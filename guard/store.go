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
// Package idem implements it on Redis, MemStore in memory (the readable
// reference) and package pgstore on Postgres; guard/guardtest is the
// conformance suite for other implementations.
//
// Every method takes the outcome the guard computed and returns the result
// the model must see, which may differ: the store applies the first two
// checks of the contract (call id binding, idempotency key) atomically, so a
// conflict or a stored result wins over the fresh outcome.
//
// A store returns an error only when it could not do its job (unreachable,
// timed out); the guard reports that as UNAVAILABLE, or as OUTCOME_UNKNOWN
// after a write ran.
//
// # Rules
//
// These are the rules every Store follows, numbered once here: MemStore,
// idem, pgstore and guard/guardtest cite them as "rule N". "Audited" means one audit record
// is appended (rule 5). Codes are terminal as Code.Terminal says: OK,
// NOT_FOUND, UNKNOWN_TOOL, INVALID_ARGUMENTS and the two conflicts.
//
// State:
//
//  1. Scopes. Bindings, records and index entries belong to one (tenant,
//     subject) pair; an audit log to one tenant. Ids are opaque and
//     compared exactly: no id (empty, or holding separators, braces,
//     newlines) may make two scopes meet.
//  2. Call binding, per (tenant, subject, call id): the fingerprint the call
//     id was first bound to, its terminal result once known (code, data,
//     message), and the idempotency key its write reserved (its link).
//     An entry whose CallID is "" binds nothing.
//  3. Idempotency record, per (tenant, subject, effective key): fingerprint,
//     state, and the operation id, tool, key and call id it ran under. The
//     states: P, reserved under Entry.Token until Now+lease; C, committed,
//     with the OK output; U, outcome unknown; X, released by its token: a
//     tombstone, free for anyone, that refuses a late copy of that token's
//     reservation (rule 12). A record is live unless it is X.
//  4. Operation index, per (tenant, subject, operation id): the record or
//     call binding a status query about the operation reads. A call
//     binding is indexed only where the index names nothing yet; a record
//     replaces what the index names unless that is another record still
//     stored (in any state): the first write operation keeps its id.
//     An index entry may instead say that nothing of the operation ran
//     (never): a write whose operation id is not its call id, with a key,
//     that Finish answered with a code that is not terminal, or that
//     Reserve refused a spent grant, marks its operation so where the
//     index names nothing yet; anything indexed later replaces the mark.
//     Releasing a record turns the index entry of the releasing call's
//     operation id that names it into that mark.
//  5. Audit log, per tenant: records numbered 1, 2, … without gaps, each
//     with Hash = AuditRecord.Link() (of PrevHash, Seq, Body, Code,
//     Delivery and SideEffect): the hex SHA-1 of prev, seq, hex SHA-256 of the body,
//     code, delivery and side effect joined by newlines, PrevHash "" for
//     the first record. The head is the last record's Seq and Hash.
//     VerifyAudit must accept the log.
//
// Checks 1 and 2 of the contract (the precheck), which Finish and Reserve
// apply first, in the same atomic step as the rest:
//
//  6. Call id: bound to another fingerprint, the answer is CALL_ID_CONFLICT
//     (fresh); bound with a terminal result, that result as local_replay.
//     Neither changes the binding.
//  7. Key: the record checked is the one the call id's link names if it is
//     live, else the live record of the entry's key ("" checks nothing).
//     Another fingerprint: IDEMPOTENCY_CONFLICT (fresh). C: OK as
//     local_replay with the stored data and message. P whose lease ends
//     after Now: IN_PROGRESS, retry after lease minus Now. Otherwise (U, or
//     P whose lease ended at or before Now): OUTCOME_UNKNOWN with the
//     record's operation id, and a P becomes U for good: a write whose
//     holder looks dead is never executed blind again.
//  8. A precheck that decides the answer audits it (side effect "no") and
//     returns it; the method does nothing else.
//  9. Binding from an answer: a call id not yet bound is bound to the
//     fingerprint, with the result if terminal; a bound one takes a
//     terminal result. A terminal answer indexes the call binding (rule 4).
//
// The methods:
//
//  10. Finish: the precheck; else audit the entry's outcome (fresh, with
//     the entry's side effect), bind the call id as in rule 9, and for OK
//     with a key make the key's record C with the output and index it, or
//     for another terminal code index the call binding. The answer is the
//     entry's outcome, fresh.
//  11. Reserve (a token is required): rule 12, then the precheck; else link
//     the call binding to the key (binding the call id to the fingerprint
//     if it is new), make the key's record P under the token until
//     Now+lease (a tombstone is replaced, a live record merged into), index
//     it, and return nil, unaudited, with e.Reserved set: the write may
//     run.
//  12. Reserve is idempotent per token: if the key's record carries the
//     entry's token, a P returns nil again with e.Reserved left false (the
//     holder may have run the write: a durable step run again, see
//     Call.Step), and any other state (the token committed or
//     released it) answers UNAVAILABLE; either way nothing changes and
//     nothing is audited.
//  13. Commit (a token is required) reads the key's record. Same fingerprint
//     and C (settled meanwhile from a receipt): the answer is OK as
//     local_replay with the stored result, audited with side effect "no",
//     and nothing is stored. Live with another fingerprint (the key now
//     belongs to another intent): it is never written; OK becomes
//     OUTCOME_UNKNOWN without data, other codes are answered as they are.
//     Otherwise OK makes it C with the output, OUTCOME_UNKNOWN makes it U,
//     and any other (not-started) code releases it if it carries the
//     entry's token: it becomes that token's tombstone. OUTCOME_UNKNOWN
//     answers carry the entry's operation id. After the audit record and
//     the record, the call binding takes the fingerprint and a terminal
//     result.
//  14. Commit is idempotent per token: a Commit whose token was committed
//     before in the same scope answers exactly what the first answered,
//     changes nothing and audits nothing.
//  15. Status (q.CallID is not used) finds the operation: the index entry of
//     q.OperationID; else the binding of the call whose id is
//     q.OperationID (its result, or the record it links); else (the index
//     alone lost) the record of q.IdempotencyKey. A record answers only
//     for the operation it ran under (its operation id is
//     q.OperationID): a key another operation took never answers for
//     this one. An index entry that says nothing ran counts as none
//     found, and the store then knows nothing ran. A call binding with a
//     result, or a C record: that result
//     as local_replay. A P record before its lease: IN_PROGRESS with the
//     wait. A U record, or a P whose lease is over (it becomes U): a
//     Pending naming the record's tool, key, fingerprint, call id and
//     operation id, unaudited. Nothing found: NOT_FOUND (fresh) when the
//     store knows nothing of the operation ran (its call is bound but
//     links no live record, or the key's record is another operation's),
//     or when q.Tool or q.IdempotencyKey is empty; else a Pending with
//     Lost and the query's own tool, key, fingerprint and operation id.
//     Every answer is audited with side effect "no".
//  16. Settle finds the operation again as Status does (q names the
//     pending's tool, key and fingerprint): what is stored now decides,
//     and an answer rule 15 would give is given, audited. Otherwise, with
//     ReceiptFound: audit OK, receipt_reconciled, side effect "yes"; unless
//     the record is lost, make it C with the data and message "", and give
//     p.CallID's binding the fingerprint and that result; answer it. With
//     ReceiptAbsent once the record's lease is over (or it is lost): audit
//     NOT_FOUND, release the record (deleted, or a tombstone if q.Token is
//     set), and answer NOT_FOUND saying the operation did not take place.
//     Otherwise audit and answer OUTCOME_UNKNOWN with the record's
//     operation id (the query's for a lost record).
//  17. Audit(tenant, after, limit): the records with Seq above after, in
//     order, at most limit (none when limit is not positive), and the head
//     ({0, ""} for a tenant with no records).
//
// Across methods:
//
//  18. Each method is one atomic step. Its audit record is appended before
//     anything is stored, so a failed append stores nothing. There is
//     exactly one record for each Finish, each Reserve that answers, each
//     first Commit of a token, each Status that answers and each Settle,
//     and none otherwise.
//  19. Every time decision uses Entry.Now, the guard's clock, in whole
//     milliseconds (a positive lease or wait is at least 1 ms), never the
//     wall clock. Retention only forgets; no decision depends on it.
//  20. Results: the message is the code's DefaultMessage when none is
//     stored, Data is nil when empty, RetryAfter is set only when positive,
//     and OperationID only when the code's recovery is query_status.
//  21. A method returns an error only when it could not do its job, and
//     then has changed nothing. MemStore's errors: a done context, a
//     Reserve or Commit without a token, a Finish or Commit whose code is
//     not valid.
//  22. A grant pays for one execution. Spent grants, per (tenant,
//     subject, grant id), name the effective key of the operation that
//     spent each. A Reserve whose entry has a GrantID, after its precheck
//     (so a retry or replay of the operation that spent it is answered as
//     rule 7 says), finds the grant spent on another key: it audits and
//     answers APPROVAL_INVALID, fresh, with GrantUsedMessage, binds
//     a new call id to the fingerprint alone (the code is not terminal),
//     and reserves nothing. Otherwise it spends the grant on the entry's
//     key, in the same step as the reservation, kept at least until
//     GrantExpiresAt plus GrantSkew. A Commit that releases its
//     token's reservation gives back a grant spent on that key: a write
//     that did not start paid for nothing.
//
// Budgets (Budgeter), kept per tenant with the same atomicity:
//
//  23. Bounds. A charge is taken only if the run's counter of (Scope, Tool)
//     has room for one more execution and its cost (MaxCalls, MaxCost; no
//     run counter when Scope is "") and the tenant's counter of the period
//     starting at PeriodStart has room for its cost (TenantLimit; none
//     when 0); then every counter it names is charged at once. Otherwise
//     nothing is taken, and the verdict names the first bound without room:
//     the run's, then the tenant's.
//  24. Tokens. A charge is taken under its token, once: a Charge or a
//     Reserve whose token took its charge takes nothing more (a Charge
//     answers BudgetTaken again; a Reserve is a copy, rule 12). A Reserve
//     with a Charge takes it after rules 12, 6–9 and 22 (a replay, a
//     conflict, IN_PROGRESS, an unknown outcome or a refused grant takes
//     none) and before it spends the grant; a bound without room is
//     audited and answered BUDGET_EXHAUSTED (fresh, Charge.Refusal of the
//     verdict), a new call id is bound to the fingerprint alone, the
//     operation is marked as one of which nothing ran, and nothing is
//     reserved or spent.
//  25. Settling. The charge of a token is given back, once, when nothing
//     of its dispatch ran: a Refund of it, a Commit of it whose entry's
//     SideEffect is none, a Settle that releases its record (ReceiptAbsent).
//     It stays taken otherwise: a Commit with a side effect yes or unknown,
//     a Settle that finds the receipt. A token given back stays spent: a
//     later Charge of it takes nothing and returns ErrChargeRefunded.
//  26. Retention. With MemStoreOptions.TTL, a run's counter is forgotten that long
//     after its last charge, a token's charge that long after it was taken
//     or given back, and a period's counter a period after the period
//     ends; no decision depends on it.
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
// or not at all (package pgstore is one; idem and MemStore are not, and a
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
