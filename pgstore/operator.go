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

// Unsettled lists the tenant's writes whose outcome is unknown (state U)
// or whose reservation's lease ran out before now (state P), sorted by
// subject and key. now is compared with leases, which are on the guard's
// clock.
func (s *Store) Unsettled(ctx context.Context, tenantID string, now time.Time) ([]guard.Unsettled, error) {
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
	var out []guard.Unsettled
	for rows.Next() {
		var (
			subject, key, op, tool, call, fp []byte
			state                            string
			lease                            int64
		)
		if err := rows.Scan(&subject, &key, &op, &tool, &call, &fp, &state, &lease); err != nil {
			return nil, errorf("unsettled: %w", err)
		}
		u := guard.Unsettled{TenantID: tenantID, SubjectID: string(subject), IdempotencyKey: string(key), OperationID: string(op),
			Tool: string(tool), CallID: string(call), Fingerprint: string(fp), State: guard.StateUnknown}
		if state == "P" {
			u.State, u.LeaseExpiry = guard.StateStuck, time.UnixMilli(lease)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// Resolve settles one unknown or stuck write by an operator's verdict, in
// one transaction with its audit record (action "resolve", naming the
// operator and the verdict), as idem.Store.Resolve does:
// guard.OutcomeCommitted stores the data as the committed result (a retry
// replays it, a status query answers it); guard.OutcomeNotStarted deletes
// the record and the operation index naming it (the key is free and a
// retry runs; a late commit of a holder that was alive after all stores
// the truth). It refuses a committed record (guard.ErrAlreadyCommitted), none or
// a released one (guard.ErrNoRecord), a reservation whose lease has not run out
// before r.Now unless r.Force (guard.ErrLeaseActive), and a record that changed
// meanwhile (guard.ErrRecordChanged). It returns the result as a replay would
// answer it.
func (s *Store) Resolve(ctx context.Context, r guard.Resolution) (*guard.Result, error) {
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
		return nil, fmt.Errorf("pgstore: %w: %s", guard.ErrNoRecord, what)
	case err != nil:
		return nil, errorf("resolve: %w", err)
	case state == "C":
		return nil, fmt.Errorf("pgstore: %w: %s (operation %q)", guard.ErrAlreadyCommitted, what, op)
	case state == "P" && lease > r.Now.UnixMilli() && !r.Force:
		return nil, fmt.Errorf("pgstore: %w: %s (operation %q) is reserved until %s; force it only if its holder is known to be gone",
			guard.ErrLeaseActive, what, op, time.UnixMilli(lease).UTC().Format(time.RFC3339))
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
			return nil, fmt.Errorf("pgstore: %w: %s was released meanwhile", guard.ErrNoRecord, what)
		case "committed":
			return nil, fmt.Errorf("pgstore: %w: %s was committed meanwhile", guard.ErrAlreadyCommitted, what)
		case "active":
			return nil, fmt.Errorf("pgstore: %w: %s was reserved again meanwhile", guard.ErrLeaseActive, what)
		}
		return nil, fmt.Errorf("pgstore: %w: %s", guard.ErrRecordChanged, what)
	}
	return a.result()
}

// findRecord returns the key of the record a resolution names: its key,
// or through its operation's index, or else through the binding of the
// call whose id is the operation id (an operation named after its call
// has no index).
func (s *Store) findRecord(ctx context.Context, r guard.Resolution) (string, error) {
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
			return "", fmt.Errorf("pgstore: %w: tenant %q subject %q has no operation %q", guard.ErrNoRecord, r.TenantID, r.SubjectID, r.OperationID)
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
		return "", fmt.Errorf("pgstore: %w: operation %q of tenant %q subject %q has a final result", guard.ErrAlreadyCommitted,
			r.OperationID, r.TenantID, r.SubjectID)
	case "n":
		return "", fmt.Errorf("pgstore: %w: nothing of operation %q of tenant %q subject %q ran", guard.ErrNoRecord, r.OperationID, r.TenantID, r.SubjectID)
	}
	return string(ref), nil
}
