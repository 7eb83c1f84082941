package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/internal/resolution"
)

// This file is the operator's way out of an ordinary write whose outcome
// nobody knows (a transactional write never is: WriteTx), as idem's
// operator.go is for Redis: list a tenant's unknown and stuck writes
// (Unsettled), and settle one by hand (Resolve), audited with the
// operator's name. cmd/toolctl is its command line.

// Unsettled is one write whose outcome is unknown or stuck, as stored in
// its idempotency record.
type Unsettled struct {
	TenantID  string
	SubjectID string
	// IdempotencyKey is the record's effective key ("k:" and the caller's
	// key, or "o:" and the operation id): with the subject it names the
	// record for Resolve.
	IdempotencyKey string
	OperationID    string
	Tool           string
	CallID         string
	Fingerprint    string
	// State is "unknown" (OUTCOME_UNKNOWN that no receipt settled) or
	// "stuck" (still reserved, its holder's lease run out).
	State string
	// LeaseExpiry is when a stuck reservation's lease ran out, on the
	// guard's clock; zero for an unknown outcome.
	LeaseExpiry time.Time
}

// Unsettled lists the tenant's writes whose outcome is unknown (state U)
// or whose reservation's lease ran out before now (state P), sorted by
// subject and key. now is compared with leases, which are on the guard's
// clock.
func (s *Store) Unsettled(ctx context.Context, tenantID string, now time.Time) ([]Unsettled, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT subject, key, coalesce(op, ''::bytea), coalesce(tool, ''::bytea), coalesce(call_id, ''::bytea),
		coalesce(fp, ''::bytea), state, lease_ms FROM `+s.schema+`.records
		WHERE tenant = $1 AND until_ms > $2 AND (state = 'U' OR (state = 'P' AND lease_ms <= $2)) ORDER BY subject, key`,
		b(tenantID), now.UnixMilli())
	if err != nil {
		return nil, errorf("unsettled: %w", err)
	}
	defer rows.Close()
	var out []Unsettled
	for rows.Next() {
		var (
			subject, key, op, tool, call, fp []byte
			state                            string
			lease                            int64
		)
		if err := rows.Scan(&subject, &key, &op, &tool, &call, &fp, &state, &lease); err != nil {
			return nil, errorf("unsettled: %w", err)
		}
		u := Unsettled{TenantID: tenantID, SubjectID: string(subject), IdempotencyKey: string(key), OperationID: string(op),
			Tool: string(tool), CallID: string(call), Fingerprint: string(fp), State: "unknown"}
		if state == "P" {
			u.State, u.LeaseExpiry = "stuck", time.UnixMilli(lease)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// Resolution is an operator's verdict on one unsettled write, for Resolve.
type Resolution struct {
	TenantID  string
	SubjectID string
	// IdempotencyKey names the record, as Unsettled lists it; or, when it
	// is empty, OperationID names the operation whose record it is.
	IdempotencyKey string
	OperationID    string
	// Outcome is what the operator established: guard.OutcomeCommitted
	// (the write took place; Data is its result, JSON, stored in its
	// canonical form) or guard.OutcomeNotStarted (it did not: its key is
	// released, so a retry runs it).
	Outcome guard.Outcome
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

// Errors Resolve returns when it refuses a resolution; they are wrapped
// with the details.
var (
	// ErrNoRecord: no idempotency record of that key or operation, or it
	// was released: there is nothing to resolve.
	ErrNoRecord = errors.New("pgstore: no unsettled record")
	// ErrAlreadyCommitted: the record holds a committed result, which an
	// operator never overwrites.
	ErrAlreadyCommitted = errors.New("pgstore: the operation is already committed")
	// ErrLeaseActive: the record is reserved and its lease has not run
	// out: its holder may still commit. Resolution.Force overrides it.
	ErrLeaseActive = errors.New("pgstore: the operation is in progress (its lease has not expired)")
	// ErrRecordChanged: the record changed between reading it and
	// resolving it. Nothing was resolved; list and try again.
	ErrRecordChanged = errors.New("pgstore: the record changed meanwhile; nothing was resolved")
)

// Resolve settles one unknown or stuck write by an operator's verdict, in
// one transaction with its audit record (action "resolve", naming the
// operator and the verdict), as idem.Store.Resolve does:
// guard.OutcomeCommitted stores the data as the committed result (a retry
// replays it, a status query answers it); guard.OutcomeNotStarted deletes
// the record and the operation index naming it (the key is free and a
// retry runs; a late commit of a holder that was alive after all stores
// the truth). It refuses a committed record (ErrAlreadyCommitted), none or
// a released one (ErrNoRecord), a reservation whose lease has not run out
// before r.Now unless r.Force (ErrLeaseActive), and a record that changed
// meanwhile (ErrRecordChanged). It returns the result as a replay would
// answer it.
func (s *Store) Resolve(ctx context.Context, r Resolution) (*guard.Result, error) {
	if err := resolution.Check("pgstore", r.Operator, r.IdempotencyKey != "" || r.OperationID != "", r.Outcome, r.Data); err != nil {
		return nil, err
	}
	data := empty
	if r.Outcome == guard.OutcomeCommitted {
		var err error
		if data, _, err = canon.Parse(r.Data, canon.Limits{}); err != nil {
			return nil, fmt.Errorf("pgstore: result data: %w", err)
		}
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	key, err := s.findRecord(ctx, r)
	if err != nil {
		return nil, err
	}
	var (
		state                     string
		fp, op, tool, call, token []byte
		lease                     int64
	)
	what := fmt.Sprintf("tenant %q subject %q key %q", r.TenantID, r.SubjectID, key)
	err = s.pool.QueryRow(ctx, `SELECT state, coalesce(fp, ''::bytea), coalesce(op, ''::bytea), coalesce(tool, ''::bytea),
		coalesce(call_id, ''::bytea), coalesce(token, ''::bytea), lease_ms FROM `+s.schema+`.records
		WHERE tenant = $1 AND subject = $2 AND key = $3 AND until_ms > $4`,
		b(r.TenantID), b(r.SubjectID), b(key), r.Now.UnixMilli()).Scan(&state, &fp, &op, &tool, &call, &token, &lease)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && state == "X":
		return nil, fmt.Errorf("%w: %s", ErrNoRecord, what)
	case err != nil:
		return nil, errorf("resolve: %w", err)
	case state == "C":
		return nil, fmt.Errorf("%w: %s (operation %q)", ErrAlreadyCommitted, what, op)
	case state == "P" && lease > r.Now.UnixMilli() && !r.Force:
		return nil, fmt.Errorf("%w: %s (operation %q) is reserved until %s; force it only if its holder is known to be gone",
			ErrLeaseActive, what, op, time.UnixMilli(lease).UTC().Format(time.RFC3339))
	}
	body := resolution.Body{Now: r.Now, TenantID: r.TenantID, SubjectID: r.SubjectID, Operator: r.Operator, Outcome: r.Outcome,
		Force: r.Force, CallID: string(call), OperationID: string(op), Key: key, Tool: string(tool), Fingerprint: string(fp)}.JSON()
	code, msg := guard.CodeOK, ""
	if r.Outcome == guard.OutcomeNotStarted {
		code, msg = guard.CodeNotFound, resolution.NotExecutedMessage
	}
	locks := locks(s.lockKey('k', r.TenantID, r.SubjectID, key), s.lockKey('o', r.TenantID, r.SubjectID, string(op)))
	var a answer
	err = a.scan(s.pool.QueryRow(ctx, s.q.resolve, locks, b(r.TenantID), b(r.SubjectID), b(key), fp, token, op,
		r.Now.UnixMilli(), s.until(r.Now), r.Force, code.String(), data, b(msg), body, bodySum(body)))
	if err != nil {
		return nil, errorf("resolve: %w", err)
	}
	if a.kind == "E" {
		switch a.code {
		case "gone":
			return nil, fmt.Errorf("%w: %s was released meanwhile", ErrNoRecord, what)
		case "committed":
			return nil, fmt.Errorf("%w: %s was committed meanwhile", ErrAlreadyCommitted, what)
		case "active":
			return nil, fmt.Errorf("%w: %s was reserved again meanwhile", ErrLeaseActive, what)
		}
		return nil, fmt.Errorf("%w: %s", ErrRecordChanged, what)
	}
	return a.result()
}

// findRecord returns the key of the record a resolution names: its key,
// or through its operation's index, or else through the binding of the
// call whose id is the operation id (an operation named after its call
// has no index).
func (s *Store) findRecord(ctx context.Context, r Resolution) (string, error) {
	if r.IdempotencyKey != "" {
		return r.IdempotencyKey, nil
	}
	var kind string
	var ref []byte
	err := s.pool.QueryRow(ctx, "SELECT kind, coalesce(ref, ''::bytea) FROM "+s.schema+".ops WHERE tenant = $1 AND subject = $2 AND op = $3 AND until_ms > $4",
		b(r.TenantID), b(r.SubjectID), b(r.OperationID), r.Now.UnixMilli()).Scan(&kind, &ref)
	if errors.Is(err, pgx.ErrNoRows) {
		var code *string
		var link []byte
		err = s.pool.QueryRow(ctx, "SELECT code, link FROM "+s.schema+".bindings WHERE tenant = $1 AND subject = $2 AND call_id = $3 AND until_ms > $4",
			b(r.TenantID), b(r.SubjectID), b(r.OperationID), r.Now.UnixMilli()).Scan(&code, &link)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && code == nil && link == nil:
			return "", fmt.Errorf("%w: tenant %q subject %q has no operation %q", ErrNoRecord, r.TenantID, r.SubjectID, r.OperationID)
		case err != nil:
			return "", errorf("resolve: %w", err)
		case code != nil:
			kind = "c"
		default:
			kind, ref = "k", link
		}
	} else if err != nil {
		return "", errorf("resolve: %w", err)
	}
	switch kind {
	case "c":
		// A call binding holds a terminal result: nothing is unsettled.
		return "", fmt.Errorf("%w: operation %q of tenant %q subject %q has a final result", ErrAlreadyCommitted,
			r.OperationID, r.TenantID, r.SubjectID)
	case "n":
		return "", fmt.Errorf("%w: nothing of operation %q of tenant %q subject %q ran", ErrNoRecord, r.OperationID, r.TenantID, r.SubjectID)
	}
	return string(ref), nil
}
