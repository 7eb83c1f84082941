package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolguard/toolguard/guard"
)

// queries are the statements of the store's steps, each one call of a
// function of sql/1.sql: one round trip, one transaction (or a statement
// in a transactional write's).
type queries struct {
	finish, reserve, commit, status, settle, charge, refund, resolve string
}

// answerCols reads an answer (sql/1.sql) with no NULL text.
const answerCols = "kind, coalesce(code, ''), coalesce(delivery, ''), data, msg, coalesce(retry_ms, 0), op, tool, key, fp, call_id, coalesce(lost, false), coalesce(xid, '')"

func newQueries(schema string) queries {
	call := func(fn string, n int) string {
		args := make([]string, n)
		for i := range args {
			args[i] = "$" + strconv.Itoa(i+1)
		}
		return "SELECT " + answerCols + " FROM " + schema + "." + fn + "(" + strings.Join(args, ", ") + ")"
	}
	return queries{
		finish:  call("finish", 17),
		reserve: call("reserve", 26),
		commit:  call("commit", 20),
		status:  call("status", 10),
		settle:  call("settle", 13),
		charge:  "SELECT " + schema + ".charge($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
		refund:  "SELECT " + schema + ".refund($1, $2, $3, $4, $5)",
		resolve: call("resolve", 15),
	}
}

// answer is a step's answer as the function returned it.
type answer struct {
	kind, code, delivery string
	data, msg, op        []byte
	retryMS              int64
	tool, key, fp, call  []byte
	lost                 bool
	xid                  string
}

func (a *answer) scan(row pgx.Row) error {
	return row.Scan(&a.kind, &a.code, &a.delivery, &a.data, &a.msg, &a.retryMS, &a.op, &a.tool, &a.key, &a.fp, &a.call, &a.lost, &a.xid)
}

// result makes the model's result of an answer of kind R (rule
// 20 of guard.Store): the code's default message when none is stored, data only when
// there is some, a wait only when positive, and the operation id only with
// recovery query_status.
func (a *answer) result() (*guard.Result, error) {
	code, ok := guard.ParseCode(a.code)
	if !ok || a.kind != "R" {
		return nil, errorf("the store's answer %q %q is not a result", a.kind, a.code)
	}
	res := &guard.Result{Code: code, Delivery: guard.Delivery(a.delivery), Message: string(a.msg)}
	if len(a.data) > 0 {
		res.Data = a.data
	}
	if res.Message == "" {
		res.Message = code.DefaultMessage()
	}
	if a.retryMS > 0 {
		res.RetryAfter = time.Duration(a.retryMS) * time.Millisecond
	}
	if code.Recovery() == guard.RecoveryQueryStatus {
		res.OperationID = string(a.op)
	}
	return res, nil
}

// bodySum is the hex SHA-256 of an audit body, which the chain's link
// covers (guard.AuditRecord.Link): computed here, so the server hashes only the link.
func bodySum(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

var errNoToken = errors.New("pgstore: a write's entry has no reservation token")

// db is what a step runs on: the pool, or a transactional write's
// transaction.
type db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Finish implements guard.Store (rule 10).
func (s *Store) Finish(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	if !e.Code.Valid() {
		return nil, errorf("the entry's code %d is not a result code", e.Code)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	defer s.maybeSweep()
	var a answer
	err := a.scan(s.pool.QueryRow(ctx, s.q.finish, s.stepLocks(e, e.CallID), b(e.TenantID), b(e.SubjectID), b(e.CallID),
		b(e.OperationID), b(e.IdempotencyKey), b(e.Tool), b(e.Fingerprint), e.Now.UnixMilli(), s.until(e.Now),
		e.Code.String(), nonNil(e.Data), b(e.Message), e.RetryAfter.Milliseconds(), string(e.SideEffect), e.AuditBody, bodySum(e.AuditBody)))
	if err != nil {
		return nil, errorf("finish: %w", err)
	}
	return a.result()
}

// nonNil returns p, or an empty slice for nil (NULL is kept for none).
func nonNil(p []byte) []byte {
	if p == nil {
		return empty
	}
	return p
}

// Reserve implements guard.Store (rules 11, 12, 22 and 24).
func (s *Store) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	if e.Token == "" {
		return nil, errNoToken
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	defer s.maybeSweep()
	var a answer
	if err := s.reserve(ctx, s.pool, e, lease, &a); err != nil {
		return nil, err
	}
	return s.reserved(e, &a)
}

// reserve runs the reserve step on d.
func (s *Store) reserve(ctx context.Context, d db, e *guard.Entry, lease time.Duration, a *answer) error {
	if err := a.scan(d.QueryRow(ctx, s.q.reserve, s.reserveArgs(e, lease, false)...)); err != nil {
		return errorf("reserve: %w", err)
	}
	return nil
}

// reserveArgs are the reserve step's arguments for e; xid asks for the
// transaction's id (a transactional write's).
func (s *Store) reserveArgs(e *guard.Entry, lease time.Duration, xid bool) []any {
	var grant []byte = empty
	var grantUntil int64
	extra := make([]int64, 0, 1)
	if e.GrantID != "" {
		grant, grantUntil = b(e.GrantID), e.GrantExpiresAt.Add(guard.GrantSkew).UnixMilli()
		extra = append(extra, s.lockKey('g', e.TenantID, e.SubjectID, e.GrantID))
	}
	c := charge{}
	if e.Charge != nil {
		c = chargeOf(e.Charge)
	}
	return []any{s.stepLocks(e, e.CallID, extra...), b(e.TenantID), b(e.SubjectID), b(e.CallID),
		b(e.OperationID), b(e.IdempotencyKey), b(e.Tool), b(e.Fingerprint), e.Now.UnixMilli(), s.until(e.Now), leaseMS(lease),
		b(e.Token), grant, grantUntil, e.Charge != nil, c.scope, c.tool, c.cost, c.maxCalls, c.maxCost, c.limit, c.pstart, c.pend,
		xid, e.AuditBody, bodySum(e.AuditBody)}
}

// leaseMS is a lease in milliseconds, at least 1 when positive (rule// rule 19).
func leaseMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d, time.Millisecond).Milliseconds()
}

// reserved turns a reserve answer into Reserve's return.
func (s *Store) reserved(e *guard.Entry, a *answer) (*guard.Result, error) {
	switch a.kind {
	case "T":
		e.Reserved = true
		return nil, nil
	case "H":
		return nil, nil // a copy of this reservation: it stands
	case "B":
		v := guard.BudgetRunSpent
		if a.retryMS == 2 {
			v = guard.BudgetTenantSpent
		}
		return &guard.Result{Code: guard.CodeBudgetExhausted, Delivery: guard.DeliveryFresh, Message: e.Charge.Refusal(v)}, nil
	}
	res, err := a.result()
	if err == nil && res.Code == guard.CodeApprovalInvalid {
		res.Message = guard.GrantUsedMessage
	}
	return res, err
}

// Commit implements guard.Store (rules 13, 14 and 25).
func (s *Store) Commit(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	if e.Token == "" {
		return nil, errNoToken
	}
	if !e.Code.Valid() {
		return nil, errorf("the entry's code %d is not a result code", e.Code)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var a answer
	if err := s.commit(ctx, s.pool, e, &a); err != nil {
		return nil, err
	}
	return a.result()
}

func (s *Store) commit(ctx context.Context, d db, e *guard.Entry, a *answer) error {
	if err := a.scan(d.QueryRow(ctx, s.q.commit, s.commitArgs(e)...)); err != nil {
		return errorf("commit: %w", err)
	}
	return nil
}

// Status implements guard.Store (rule 15).
func (s *Store) Status(ctx context.Context, q *guard.Entry) (*guard.Result, *guard.Pending, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var a answer
	err := a.scan(s.pool.QueryRow(ctx, s.q.status, s.stepLocks(q, ""), b(q.TenantID), b(q.SubjectID), b(q.OperationID),
		b(q.IdempotencyKey), b(q.Tool), b(q.Fingerprint), q.Now.UnixMilli(), q.AuditBody, bodySum(q.AuditBody)))
	if err != nil {
		return nil, nil, errorf("status: %w", err)
	}
	if a.kind == "P" {
		return nil, &guard.Pending{Tool: string(a.tool), IdempotencyKey: string(a.key), Fingerprint: string(a.fp),
			CallID: string(a.call), OperationID: string(a.op), Lost: a.lost}, nil
	}
	res, err := a.result()
	return res, nil, err
}

// Settle implements guard.Store (rule 16).
func (s *Store) Settle(ctx context.Context, q *guard.Entry, p *guard.Pending, r guard.Receipt, data []byte) (*guard.Result, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	receipt := 0
	switch r {
	case guard.ReceiptFound:
		receipt = 1
	case guard.ReceiptAbsent:
		receipt = 2
	}
	var a answer
	err := a.scan(s.pool.QueryRow(ctx, s.q.settle, s.stepLocks(q, p.CallID), b(q.TenantID), b(q.SubjectID), b(p.CallID),
		b(q.OperationID), b(q.IdempotencyKey), b(q.Tool), q.Now.UnixMilli(), s.until(q.Now), receipt, nonNil(data),
		q.AuditBody, bodySum(q.AuditBody)))
	if err != nil {
		return nil, errorf("settle: %w", err)
	}
	return a.result()
}
