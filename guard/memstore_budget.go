package guard

import (
	"context"
)

// budgets are the counters of Budgeter (rules 23–26): per tenant,
// run and tool; per tenant and period; and what each token took.
type budgets struct {
	runs    map[runKey]*runSpend
	periods map[periodKey]*periodSpend
	charges map[scope]*charge // by tenant and token
}

type runKey struct{ tenant, scope, tool string }

type runSpend struct{ calls, cost, until int64 }

type periodKey struct {
	tenant string
	start  int64 // ms
}

type periodSpend struct {
	cost int64
	end  int64 // ms: the period's end, after which it is forgotten
}

// charge is what one token took (rule 24), until it is given back.
type charge struct {
	c        BudgetCharge
	returned bool
	until    int64
}

var _ Budgeter = (*MemStore)(nil)

// take takes c under its token if every bound has room (rule 23); a token
// that took its charge before takes nothing more (rule 24).
func (s *MemStore) take(c *BudgetCharge, now int64) (BudgetVerdict, error) {
	b := &s.budget
	if b.runs == nil {
		b.runs, b.periods, b.charges = map[runKey]*runSpend{}, map[periodKey]*periodSpend{}, map[scope]*charge{}
	}
	tok := scope{tenant: c.TenantID, id: c.Token}
	if prev := b.charges[tok]; prev != nil && !expired(prev.until, now) {
		if prev.returned {
			return 0, ErrChargeRefunded
		}
		return BudgetTaken, nil
	}
	var run *runSpend
	if c.Scope != "" {
		k := runKey{c.TenantID, c.Scope, c.Tool}
		if run = b.runs[k]; run == nil {
			run = &runSpend{}
			b.runs[k] = run
		}
		if (c.MaxCalls > 0 && run.calls+1 > c.MaxCalls) || (c.MaxCost > 0 && run.cost+c.Cost > c.MaxCost) {
			return BudgetRunSpent, nil
		}
	}
	var period *periodSpend
	if c.TenantLimit > 0 {
		k := periodKey{c.TenantID, c.PeriodStart.UnixMilli()}
		if period = b.periods[k]; period == nil {
			period = &periodSpend{end: c.PeriodStart.Add(c.Period).UnixMilli()}
			b.periods[k] = period
		}
		if period.cost+c.Cost > c.TenantLimit {
			return BudgetTenantSpent, nil
		}
	}
	if run != nil {
		run.calls++
		run.cost += c.Cost
		run.until = s.expiry(now)
	}
	if period != nil {
		period.cost += c.Cost
	}
	b.charges[tok] = &charge{c: *c, until: s.expiry(now)}
	return BudgetTaken, nil
}

// giveBack gives back what the token took, once (rule 25): it stays
// spent, so a late copy of its charge takes nothing.
func (s *MemStore) giveBack(tenant, token string, now int64) {
	b := &s.budget
	if b.charges == nil || token == "" {
		return
	}
	tok := scope{tenant: tenant, id: token}
	ch := b.charges[tok]
	if ch == nil || expired(ch.until, now) {
		b.charges[tok] = &charge{returned: true, until: s.expiry(now)}
		return
	}
	if ch.returned {
		return
	}
	ch.returned = true
	c := &ch.c
	if run := b.runs[runKey{c.TenantID, c.Scope, c.Tool}]; run != nil && c.Scope != "" {
		run.calls--
		run.cost -= c.Cost
	}
	if p := b.periods[periodKey{c.TenantID, c.PeriodStart.UnixMilli()}]; p != nil && c.TenantLimit > 0 {
		p.cost -= c.Cost
	}
}

// keep forgets a token whose charge stays taken for good (rule 25).
func (s *MemStore) keep(tenant, token string) {
	if s.budget.charges != nil {
		delete(s.budget.charges, scope{tenant: tenant, id: token})
	}
}

// settleCharge settles the charge a write's commit carries (rule 25): given
// back when nothing ran in its dispatch (side effect none), kept otherwise
// once the write is committed.
func (t *memStep) settleCharge(committedNow bool) {
	e := t.e
	if e.Charge == nil {
		return
	}
	switch {
	case e.SideEffect == SideEffectNone:
		t.s.giveBack(e.TenantID, e.Token, t.now)
	case committedNow:
		t.s.keep(e.TenantID, e.Token)
	}
}

// forgetBudgets forgets, with MemStoreOptions.TTL, the runs without a charge for
// that long, the periods that ended a period ago, and the charges that
// expired (the sweep).
func (s *MemStore) forgetBudgets(now int64) {
	for k, r := range s.budget.runs {
		if expired(r.until, now) {
			delete(s.budget.runs, k)
		}
	}
	for k, p := range s.budget.periods {
		if p.end+(p.end-k.start) <= now {
			delete(s.budget.periods, k)
		}
	}
	forget(s.budget.charges, func(c *charge) int64 { return c.until }, now)
}

// Charge implements Budgeter for a read (rules 23 and 24): every
// bound of c is checked and, if each has room, charged under c.Token,
// under the store's one lock.
func (s *MemStore) Charge(ctx context.Context, c *BudgetCharge) (BudgetVerdict, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.take(c, c.Now.UnixMilli())
}

// Refund implements Budgeter (rule 25).
func (s *MemStore) Refund(ctx context.Context, c *BudgetCharge) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.giveBack(c.TenantID, c.Token, c.Now.UnixMilli())
	return nil
}
