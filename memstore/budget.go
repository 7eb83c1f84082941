package memstore

import (
	"context"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// budgets are the counters of guard.Budgeter: per tenant, run and tool,
// and per tenant and period. Periods that ended are forgotten when a
// charge of the tenant's next period comes.
type budgets struct {
	runs    map[runKey]*runSpend
	tenants map[string]*periodSpend
}

type runKey struct{ tenant, scope, tool string }

type runSpend struct{ calls, cost int64 }

type periodSpend struct {
	start time.Time
	cost  int64
}

var _ guard.Budgeter = (*Store)(nil)

// Charge implements guard.Budgeter: every bound of c is checked and, if
// each has room, charged, under the store's one lock.
func (s *Store) Charge(_ context.Context, c *guard.BudgetCharge) (guard.BudgetVerdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget.runs == nil {
		s.budget.runs, s.budget.tenants = map[runKey]*runSpend{}, map[string]*periodSpend{}
	}
	var run *runSpend
	if c.Scope != "" {
		k := runKey{c.TenantID, c.Scope, c.Tool}
		if run = s.budget.runs[k]; run == nil {
			run = &runSpend{}
			s.budget.runs[k] = run
		}
		if (c.MaxCalls > 0 && run.calls+1 > c.MaxCalls) || (c.MaxCost > 0 && run.cost+c.Cost > c.MaxCost) {
			return guard.BudgetRunSpent, nil
		}
	}
	var period *periodSpend
	if c.TenantLimit > 0 {
		period = s.budget.tenants[c.TenantID]
		if period == nil || !period.start.Equal(c.PeriodStart) {
			period = &periodSpend{start: c.PeriodStart}
			s.budget.tenants[c.TenantID] = period
		}
		if period.cost+c.Cost > c.TenantLimit {
			return guard.BudgetTenantSpent, nil
		}
	}
	if run != nil {
		run.calls++
		run.cost += c.Cost
	}
	if period != nil {
		period.cost += c.Cost
	}
	return guard.BudgetTaken, nil
}

// Refund implements guard.Budgeter.
func (s *Store) Refund(_ context.Context, c *guard.BudgetCharge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if run := s.budget.runs[runKey{c.TenantID, c.Scope, c.Tool}]; run != nil && c.Scope != "" {
		run.calls--
		run.cost -= c.Cost
	}
	if p := s.budget.tenants[c.TenantID]; p != nil && c.TenantLimit > 0 && p.start.Equal(c.PeriodStart) {
		p.cost -= c.Cost
	}
	return nil
}
