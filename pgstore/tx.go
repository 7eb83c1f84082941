package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// TxFunc is a transactional write's typed implementation (WriteTx): it
// writes its effect through tx, the store's transaction, and returns its
// output. It must not commit or roll back tx, nor use it once it returned:
// returning a result commits its rows with the outcome and the audit
// record; returning an error rolls them back (tx.Commit and tx.Rollback
// do nothing and return an error). tx.Begin makes a savepoint, as in pgx.
type TxFunc[In, Out any] func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in In) (Out, error)

// WriteTx declares a write tool whose effect is rows in the store's
// database (guard.ToolSpec.Transactional): on a guard over this package's
// Store, fn runs inside the store's transaction, so the reservation, its
// rows, the outcome, the idempotency record and the audit record commit
// together or not at all. Its outcome is never OUTCOME_UNKNOWN: a crash
// before the commit means it did not happen (a retry runs it; a status
// query says NOT_FOUND), after it, that it happened once (a retry
// replays). fn's error is a write that did not happen: its code if it is
// a guard.Error a read may claim (NOT_FOUND, RATE_LIMIT,
// TIMEOUT_BEFORE_EXECUTE, INVALID_ARGUMENTS, UNAVAILABLE), else
// UNAVAILABLE. opts are toolset.Write's; a receipt lookup is not needed
// (the outcome is never unknown). On a store that cannot hold the
// transaction (idem, guard.MemStore) the tool does not run: UNAVAILABLE. It
// panics like toolset.Write.
func WriteTx[In, Out any](name, description string, fn TxFunc[In, Out], opts *toolset.Options[In, Out]) toolset.Declared {
	if fn == nil {
		panic("pgstore: transactional tool " + name + " has a nil function")
	}
	t := toolset.Write(name, description, func(ctx context.Context, inv *guard.Invocation, in In) (Out, error) {
		tx, ok := ctx.Value(txKey{}).(*toolTx)
		if !ok {
			var zero Out
			return zero, guard.NotStarted(errNoTx)
		}
		return fn(ctx, inv, tx, in)
	}, opts)
	tt := &txTool[In, Out]{Tool: t, spec: *t.Spec()}
	tt.spec.Transactional = true
	return tt
}

// txTool is a toolset.Tool whose spec says it is transactional.
type txTool[In, Out any] struct {
	*toolset.Tool[In, Out]
	spec guard.ToolSpec
}

// Spec implements guard.Tool.
func (t *txTool[In, Out]) Spec() *guard.ToolSpec { return &t.spec }

// txKey is the context key of the transaction RunTx hands its run.
type txKey struct{}

var (
	errNoTx      = errors.New("pgstore: a transactional tool ran outside the store's transaction")
	errToolTxEnd = errors.New("pgstore: a transactional tool's transaction is committed or rolled back by the guard with its outcome, not by the tool")
)

// toolTx is the transaction a transactional tool gets: the store's, whose
// end is the guard's.
type toolTx struct{ pgx.Tx }

// Commit does nothing: the store commits the transaction with the outcome.
func (*toolTx) Commit(context.Context) error { return errToolTxEnd }

// Rollback does nothing: an error returned by the tool rolls its rows back.
func (*toolTx) Rollback(context.Context) error { return errToolTxEnd }

// notCommittedMessage answers a transactional write whose transaction did
// not commit.
const notCommittedMessage = "The write's transaction did not commit; nothing was executed. It may be tried again."

// unsettledMessage answers a transactional write whose COMMIT reply was
// lost and that the store could not settle in time.
const unsettledMessage = "The store has not confirmed this write's commit yet: it either committed or did not happen, never half. Retry it: the retry replays it or runs it once."

// RunTx implements guard.TxStore: one transaction holds the reservation,
// the tool's rows (run's), the outcome, the idempotency record and the
// audit record. Its round trips: BEGIN and the reservation together; the
// tool's own statements; the outcome's commit and COMMIT together. A write whose
// outcome is not OK is rolled back whole, and its outcome is stored on
// its own as a dispatch that reserved nothing (Finish). A COMMIT whose
// reply is lost is settled by asking Postgres whether the transaction
// (its id taken in the reservation) committed (settleCommit).
func (s *Store) RunTx(ctx context.Context, e *guard.Entry, lease time.Duration, run func(ctx context.Context)) (*guard.Result, error) {
	if e.Token == "" {
		return nil, errNoToken
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	defer s.maybeSweep()
	if outer, ok := ctx.Value(outerKey{}).(pgx.Tx); ok {
		return s.runIn(ctx, outer, e, lease, run)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, errorf("connecting: %w", err)
	}
	defer conn.Release()
	// BEGIN and the reservation go together, one round trip.
	var a answer
	begin := &pgx.Batch{}
	begin.BeginTx(pgx.TxOptions{})
	begin.Queue(s.q.reserve, s.reserveArgs(e, lease, true)...)
	br := conn.SendBatch(ctx, begin)
	tx := br.Tx()
	// From here on, a step that fails rolls the transaction back; its end
	// outlives the caller's context.
	end := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	}
	rollback := func() {
		rctx, cancel := end()
		defer cancel()
		_ = tx.Rollback(rctx)
	}
	_, err = br.Exec()
	if err == nil {
		err = a.scan(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback()
		return nil, errorf("reserve: %w", err)
	}
	switch a.kind {
	case "T":
	case "H":
		// The key is reserved under this token already, and not by a
		// transaction of this store (its reservations never commit
		// alone): a durable step ran the tool before it was declared
		// transactional, and may have run it. Never run blind.
		rollback()
		return &guard.Result{Code: guard.CodeOutcomeUnknown, Delivery: guard.DeliveryFresh,
			Message: guard.CodeOutcomeUnknown.DefaultMessage(), OperationID: e.OperationID}, nil
	default:
		// An answer from the store's checks, audited: it commits, and
		// nothing runs.
		res, rerr := s.reserved(e, &a)
		cctx, cancel := end()
		defer cancel()
		if err := tx.Commit(cctx); err != nil {
			return nil, errorf("commit: %w", err)
		}
		return res, rerr
	}
	run(context.WithValue(ctx, txKey{}, &toolTx{Tx: tx}))
	if e.Code != guard.CodeOK {
		// Nothing of a write that failed may stay: roll it back whole
		// (its reservation, its charge and its grant with it), and store
		// its outcome as a dispatch that reserved nothing.
		rollback()
		return s.abandon(ctx, e, "")
	}
	if conn.Conn().IsClosed() {
		// The tool's statements lost the connection (or its context
		// ended): the transaction went with it, and COMMIT never left.
		return s.abandon(ctx, e, notCommittedMessage)
	}
	cctx, cancel := end()
	defer cancel()
	batch := &pgx.Batch{}
	args := s.commitArgs(e)
	args[0] = []int64{} // the reservation took the locks, held until COMMIT
	batch.Queue(s.q.commit, args...)
	batch.Queue("COMMIT")
	br = conn.SendBatch(cctx, batch)
	cerr := a.scan(br.QueryRow())
	var tag pgconn.CommandTag
	if cerr == nil {
		tag, cerr = br.Exec()
	}
	if err := br.Close(); cerr == nil {
		cerr = err
	}
	switch {
	case cerr == nil && tag.String() == "COMMIT":
		return a.result()
	case cerr == nil:
		// COMMIT answered ROLLBACK: the transaction was aborted.
		return s.abandon(ctx, e, notCommittedMessage)
	case refused(cerr):
		// The server refused a statement or the commit itself: the
		// transaction did not commit.
		rollback()
		return s.abandon(ctx, e, notCommittedMessage)
	}
	// The reply was lost (a cut connection, a server that went away, a
	// timeout): the transaction committed or it did not. Ask.
	_ = conn.Conn().Close(context.Background())
	return s.settleCommit(ctx, e, a.xid)
}

// commitArgs are the commit step's arguments for e.
func (s *Store) commitArgs(e *guard.Entry) []any {
	return []any{s.stepLocks(e, e.CallID), b(e.TenantID), b(e.SubjectID), b(e.CallID),
		b(e.OperationID), b(e.IdempotencyKey), b(e.Tool), b(e.Fingerprint), e.Now.UnixMilli(), s.until(e.Now), b(e.Token),
		e.Code.String(), nonNil(e.Data), b(e.Message), e.RetryAfter.Milliseconds(), string(e.SideEffect), e.Charge != nil,
		b(e.GrantID), e.AuditBody, bodySum(e.AuditBody)}
}

// refused reports whether err is the server's refusal of a statement
// (severity ERROR): the transaction did not commit. A FATAL or PANIC, or
// no answer at all, may come after a COMMIT the server carried out.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC" && pe.SeverityUnlocalized != "FATAL" &&
		pe.SeverityUnlocalized != "PANIC"
}

// abandon stores, as a dispatch that reserved nothing (Finish), the
// outcome of a transactional write whose transaction was rolled back:
// the tool's own failure, or, with msg, a write that did not commit
// (UNAVAILABLE, nothing executed).
func (s *Store) abandon(ctx context.Context, e *guard.Entry, msg string) (*guard.Result, error) {
	if msg != "" {
		e.Code, e.Data, e.Message, e.RetryAfter, e.SideEffect = guard.CodeUnavailable, nil, msg, 0, guard.SideEffectNone
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	return s.Finish(fctx, e)
}

// settleCommit decides a transactional write whose COMMIT reply was lost,
// on a new connection, until Options.SettleTimeout: pg_xact_status of the
// transaction's id says committed, aborted or in progress (a commit
// waiting for synchronous standbys is still in progress). Committed, the
// row its commit step wrote for the token must be there too (an id a new
// primary gave another transaction after a failover is not this write's)
// and is the answer, once a write of the store's own has committed after
// it, so that with synchronous_standby_names the standbys hold both before
// the write is acknowledged. Aborted, an id the server never reached, or
// committed without that row, the write did not happen. Undecided in
// time, it is IN_PROGRESS: never a guess.
func (s *Store) settleCommit(ctx context.Context, e *guard.Entry, xid string) (*guard.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.settleTimeout)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		res, decided, committed := s.askCommit(ctx, e, xid)
		if decided && committed {
			return res, nil
		}
		if decided {
			return s.abandon(ctx, e, notCommittedMessage)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &guard.Result{Code: guard.CodeInProgress, Delivery: guard.DeliveryFresh, Message: unsettledMessage,
				RetryAfter: time.Second}, nil
		case <-t.C:
		}
	}
}

// askCommit asks once whether the transaction xid committed: decided is
// false when the server could not say (unreachable, still in progress).
func (s *Store) askCommit(ctx context.Context, e *guard.Entry, xid string) (res *guard.Result, decided, committed bool) {
	actx, cancel := context.WithTimeout(ctx, time.Second+s.settleTimeout/4)
	defer cancel()
	var status *string
	err := s.pool.QueryRow(actx, "SELECT pg_xact_status($1::xid8)", xid).Scan(&status)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "22023":
		// "transaction ID … is in the future": the server never had it
		// (a restart that lost it before it was durable, or a standby
		// promoted without it).
		return nil, true, false
	case err != nil || status == nil:
		return nil, false, false
	case *status == "aborted":
		return nil, true, false
	case *status != "committed":
		return nil, false, false
	}
	// Committed. A commit of the store's own after it waits for the
	// synchronous standbys, whose WAL then holds this one too.
	if _, err := s.pool.Exec(actx, "UPDATE "+s.schema+".settles SET n = n + 1 WHERE id = 1"); err != nil {
		return nil, false, false
	}
	var a answer
	// Its commit step wrote the record, its token the record's done.
	err = a.scan(s.pool.QueryRow(actx, "SELECT 'R', 'OK', 'fresh', data, msg, 0::bigint, op, NULL::bytea, NULL::bytea, NULL::bytea, NULL::bytea, false, ''"+
		" FROM "+s.schema+".records WHERE tenant = $1 AND subject = $2 AND key = $3 AND done = $4 AND state = 'C'",
		b(e.TenantID), b(e.SubjectID), b(e.IdempotencyKey), b(e.Token)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The transaction that committed under this id is not this
		// write's, which would have left its commit's row: after a
		// failover to a standby that never saw this write's id, the new
		// primary gives it to another. This write did not commit.
		return nil, true, false
	case err != nil:
		return nil, false, false
	}
	res, err = a.result()
	return res, err == nil, err == nil
}

// outerKey is the context key of InTx's transaction.
type outerKey struct{}

// InTx returns a context under which a transactional write (WriteTx)
// dispatched on the store runs in tx, a transaction the caller began on
// the store's database and commits, instead of one of the store's own:
// its reservation, its rows, its outcome and its audit record are written
// in tx, and commit or roll back with whatever else the caller writes
// there, such as an engine's record of the step (integrations/dbos runs
// such a dispatch as a DBOS transaction). The store sends no BEGIN and no
// COMMIT, and settles no lost COMMIT reply: the caller's commit decides,
// and a caller that cannot tell whether it committed asks its own record.
// A tool that fails is rolled back to a savepoint taken before it ran,
// and its reservation released, in tx. Other steps (reads, other writes)
// ignore the context's transaction.
func InTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, outerKey{}, tx)
}

// runIn is RunTx in the caller's transaction tx (InTx).
func (s *Store) runIn(ctx context.Context, tx pgx.Tx, e *guard.Entry, lease time.Duration, run func(ctx context.Context)) (*guard.Result, error) {
	var a answer
	if err := a.scan(tx.QueryRow(ctx, s.q.reserve, s.reserveArgs(e, lease, false)...)); err != nil {
		return nil, errorf("reserve: %w", err)
	}
	switch a.kind {
	case "T":
	case "H":
		// As in RunTx: reserved under this token, not by a transaction.
		return &guard.Result{Code: guard.CodeOutcomeUnknown, Delivery: guard.DeliveryFresh,
			Message: guard.CodeOutcomeUnknown.DefaultMessage(), OperationID: e.OperationID}, nil
	default:
		return s.reserved(e, &a) // audited in tx, which the caller commits
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT toolguard_tool"); err != nil {
		return nil, errorf("savepoint: %w", err)
	}
	run(context.WithValue(ctx, txKey{}, &toolTx{Tx: tx}))
	if e.Code != guard.CodeOK {
		// The tool's rows go; the reservation stays, for the commit step
		// to release with the outcome.
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT toolguard_tool"); err != nil {
			return nil, errorf("rolling the tool back: %w", err)
		}
	}
	args := s.commitArgs(e)
	args[0] = []int64{} // the reservation took the locks, held until the caller's commit
	if err := a.scan(tx.QueryRow(ctx, s.q.commit, args...)); err != nil {
		return nil, errorf("commit: %w", err)
	}
	return a.result()
}
