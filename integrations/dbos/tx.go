package tgdbos

import (
	"context"
	"errors"
	"strconv"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/pgstore"
)

// dispatchTx is the dispatch of a transactional tool as a DBOS
// transaction (Options.DataSource): the guard's reservation, the tool's
// rows, the outcome and the audit record are written in DBOS's transaction
// (pgstore.InTx), which commits them with DBOS's record of the step.
func (s *steps) dispatchTx(in durable.DispatchInput, name string) (durable.DispatchOutput, error) {
	return dbos.RunAsTransaction(s.ctx, s.opts.DataSource, func(ctx context.Context, tx dbos.Tx) (durable.DispatchOutput, error) {
		if dc, ok := ctx.(dbos.Context); ok {
			if id, err := dbos.GetStepID(dc); err == nil {
				in.Step = strconv.Itoa(id)
			}
		}
		return s.r.Dispatch(pgstore.InTx(ctx, &dbosTx{tx: tx}), in)
	}, dbos.WithStepName(name))
}

// transactional reports whether the tool named name is a transactional
// write (pgstore.WriteTx): its dispatch is a DBOS transaction when
// Options.DataSource is set.
func (s *steps) transactional(name string) bool {
	if s.opts.DataSource == nil {
		return false
	}
	t := s.r.Host.Guard().Tools().Lookup(name)
	return t != nil && t.Spec().Transactional
}

// errTxUnsupported is what dbosTx answers for what a DBOS transaction
// does not carry: COPY, batches, prepared statements, large objects, the
// connection.
var errTxUnsupported = errors.New("tgdbos: a transactional tool in a DBOS transaction may Exec, Query, QueryRow and Begin (a savepoint), nothing else")

// dbosTx is DBOS's transaction as the pgx.Tx the guard's store and a
// transactional tool take. DBOS hands its transaction function a dbos.Tx,
// over the pgx transaction it began: this passes Exec, Query and QueryRow
// through to it, makes Begin a savepoint, and refuses the rest
// (errTxUnsupported). Commit and Rollback of the outermost are refused:
// DBOS ends its transaction.
type dbosTx struct {
	tx        dbos.Tx
	savepoint string // "" for DBOS's transaction itself
	depth     int
	closed    bool
}

var _ pgx.Tx = (*dbosTx)(nil)

func (t *dbosTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	name := "tgdbos_sp_" + strconv.Itoa(t.depth+1)
	if _, err := t.tx.Exec(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &dbosTx{tx: t.tx, savepoint: name, depth: t.depth + 1}, nil
}

func (t *dbosTx) Commit(ctx context.Context) error {
	if t.savepoint == "" {
		return errors.New("tgdbos: DBOS commits its transaction when the step returns")
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	_, err := t.tx.Exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
	return err
}

func (t *dbosTx) Rollback(ctx context.Context) error {
	if t.savepoint == "" {
		return errors.New("tgdbos: DBOS rolls its transaction back when the step fails")
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	_, err := t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.savepoint)
	return err
}

func (t *dbosTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	res, err := t.tx.Exec(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	// The command's name is DBOS's to keep: the tag carries the count.
	return pgconn.NewCommandTag("ROWS " + strconv.FormatInt(n, 10)), nil
}

func (t *dbosTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	rows, err := t.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return &dbosRows{rows: rows}, nil
}

func (t *dbosTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.closed {
		return errRow{pgx.ErrTxClosed}
	}
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *dbosTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errTxUnsupported
}

func (t *dbosTx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	return pgx.FailedBatchResults(b, errTxUnsupported)
}

func (t *dbosTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *dbosTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errTxUnsupported
}

func (t *dbosTx) Conn() *pgx.Conn { return nil }

// errRow is a row whose Scan fails.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// dbosRows is DBOS's rows as pgx.Rows: Next, Scan, Err and Close pass
// through; what DBOS does not carry (field descriptions, raw values, the
// connection) is empty, and Values fails.
type dbosRows struct {
	rows dbos.Rows
	err  error
}

func (r *dbosRows) Close()                                       { _ = r.rows.Close() }
func (r *dbosRows) Err() error                                   { return errors.Join(r.err, r.rows.Err()) }
func (r *dbosRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r *dbosRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r *dbosRows) Next() bool                                   { return r.rows.Next() }
func (r *dbosRows) Scan(dest ...any) error                       { return r.rows.Scan(dest...) }
func (r *dbosRows) RawValues() [][]byte                          { return nil }
func (r *dbosRows) Conn() *pgx.Conn                              { return nil }
func (r *dbosRows) TypeMap() *pgtype.Map                         { return pgtype.NewMap() }

func (r *dbosRows) Values() ([]any, error) {
	r.err = errTxUnsupported
	return nil, errTxUnsupported
}
