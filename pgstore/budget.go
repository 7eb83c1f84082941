package pgstore

import (
	"context"

	"github.com/toolguard/toolguard/guard"
)

// charge is a guard.BudgetCharge as the functions take it (rules 23–26):
// times in milliseconds, strings as bytea.
type charge struct {
	scope, tool                    []byte
	cost, maxCalls, maxCost, limit int64
	pstart, pend                   int64
}

func chargeOf(c *guard.BudgetCharge) charge {
	out := charge{scope: b(c.Scope), tool: b(c.Tool), cost: c.Cost, maxCalls: c.MaxCalls, maxCost: c.MaxCost, limit: c.TenantLimit}
	if c.TenantLimit > 0 {
		out.pstart, out.pend = c.PeriodStart.UnixMilli(), c.PeriodStart.Add(c.Period).UnixMilli()
	}
	return out
}

// tokenLock is the advisory lock of a charge's token: copies of one
// charge take turns.
func (s *Store) tokenLock(c *guard.BudgetCharge) []int64 {
	return []int64{s.lockKey('t', c.TenantID, "", c.Token)}
}

// Charge implements guard.Budgeter for a read (rules 23 and 24):
// every bound of c is checked and, if each has room, charged under
// c.Token, in one transaction that locks the counters it reads.
func (s *Store) Charge(ctx context.Context, c *guard.BudgetCharge) (guard.BudgetVerdict, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ch := chargeOf(c)
	var v int
	err := s.pool.QueryRow(ctx, s.q.charge, s.tokenLock(c), b(c.TenantID), b(c.Token), c.Now.UnixMilli(), s.until(c.Now),
		ch.scope, ch.tool, ch.cost, ch.maxCalls, ch.maxCost, ch.limit, ch.pstart, ch.pend).Scan(&v)
	switch {
	case err != nil:
		return 0, errorf("charge: %w", err)
	case v == 3:
		return 0, guard.ErrChargeRefunded
	case v == 1:
		return guard.BudgetRunSpent, nil
	case v == 2:
		return guard.BudgetTenantSpent, nil
	}
	return guard.BudgetTaken, nil
}

// Refund implements guard.Budgeter (rule 25).
func (s *Store) Refund(ctx context.Context, c *guard.BudgetCharge) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q.refund, s.tokenLock(c), b(c.TenantID), b(c.Token), c.Now.UnixMilli(), s.until(c.Now)); err != nil {
		return errorf("refund: %w", err)
	}
	return nil
}
