package guard

import (
	"context"
	"errors"
	"time"
)

// Budgets. A tool may bound what one run spends on it (ToolSpec.Budget: a
// number of executions and a cost), and the host may bound what a tenant
// spends in a period, across tools (Options.TenantBudget). The store keeps
// the counters with the same atomicity as the dispatch (Budgeter): a charge
// is taken, all bounds at once, only if every bound still has room, so
// concurrent calls of one tenant never overspend. A call that would exceed
// a bound does not run: it is answered BUDGET_EXHAUSTED (failed, nothing
// ran, recovery none: the model is told the budget is spent and not to
// retry), and audited like every answer. What does not run costs nothing:
// a replay of a stored outcome, a call the store answers IN_PROGRESS or a
// conflict, and an execution whose outcome is not_started get their charge
// back. Tools without a budget, with no tenant budget set, take no extra
// step.

// Budget bounds what one run (ExecutionContext.Scope: the agent run, the
// session, the workflow) spends on one tool. A call without a scope is
// bound by the tenant's budget only.
type Budget struct {
	// MaxCalls bounds the tool's executions per run; 0: no bound.
	MaxCalls int64
	// Cost is what one execution costs, in the host's units; CostOf, if
	// set, prices one from its decoded input instead. Neither: free.
	Cost   int64
	CostOf func(input any) int64
	// MaxCost bounds the cost of the tool's executions per run; 0: none.
	MaxCost int64
}

// TenantBudget bounds what a tenant spends in a period, across tools
// (Options.TenantBudget).
type TenantBudget struct {
	// Limit is the cost a tenant may spend in one period; 0: no bound.
	Limit int64
	// Period is the length of a budget period; default 24 hours. Periods
	// are aligned to the Unix epoch: with 24 hours, UTC days.
	Period time.Duration
}

// BudgetCharge is one execution's charge, for a Budgeter to take.
type BudgetCharge struct {
	TenantID string
	// Scope and Tool name the run's counter; Scope "" has none.
	Scope, Tool string
	// Cost is what the execution costs (0 or more).
	Cost int64
	// MaxCalls and MaxCost are the tool's per-run bounds (0: none).
	MaxCalls, MaxCost int64
	// TenantLimit is the tenant's bound for the period that starts at
	// PeriodStart and lasts Period (0: none).
	TenantLimit int64
	PeriodStart time.Time
	Period      time.Duration
}

// BudgetVerdict is a Budgeter's answer to a charge.
type BudgetVerdict int

// The verdicts.
const (
	// BudgetTaken: every bound had room; the charge is taken.
	BudgetTaken BudgetVerdict = iota
	// BudgetRunSpent: the run's bound for the tool has no room; nothing
	// was taken.
	BudgetRunSpent
	// BudgetTenantSpent: the tenant's bound for the period has no room;
	// nothing was taken.
	BudgetTenantSpent
)

// Budgeter is a store that keeps budgets (idem.Store and memstore.Store
// are). Charge takes c, atomically, if every bound it names has room, and
// says which has none otherwise; Refund gives a taken charge back.
type Budgeter interface {
	Charge(ctx context.Context, c *BudgetCharge) (BudgetVerdict, error)
	Refund(ctx context.Context, c *BudgetCharge) error
}

// ErrNoBudgeter is the reason a call with a budget is UNAVAILABLE on a
// store that keeps no budgets: it fails closed rather than run unbounded.
var ErrNoBudgeter = errors.New("guard: the store keeps no budgets (guard.Budgeter): a call with a budget cannot run")

// refundTimeout bounds giving a charge back, which must outlive the
// caller's context.
const refundTimeout = 5 * time.Second

// charge takes the budget charge of a call about to execute: nil when no
// budget applies. A charge the store refused is answered with the call's
// error code in code, and nothing runs.
func (g *Guard) charge(ctx context.Context, inv *Invocation) (c *BudgetCharge, code Code, err error) {
	spec := inv.tool.Spec()
	b := spec.Budget
	run := inv.Context.Scope != "" && (b.MaxCalls > 0 || b.MaxCost > 0)
	tenant := g.opts.TenantBudget.Limit > 0
	if !run && !tenant {
		return nil, 0, nil
	}
	bs, ok := g.store.(Budgeter)
	if !ok {
		return nil, CodeUnavailable, ErrNoBudgeter
	}
	cost := b.Cost
	if b.CostOf != nil {
		if perr := safeRun(func() error { cost = b.CostOf(inv.Input); return nil }); perr != nil {
			return nil, CodeUnavailable, perr
		}
	}
	c = &BudgetCharge{TenantID: inv.Principal.TenantID, Tool: spec.Name, Cost: max(cost, 0)}
	if run {
		c.Scope, c.MaxCalls, c.MaxCost = inv.Context.Scope, b.MaxCalls, b.MaxCost
	}
	if tenant {
		p := g.opts.TenantBudget.Period
		if p <= 0 {
			p = 24 * time.Hour
		}
		now := inv.Now.UnixNano()
		c.TenantLimit, c.Period, c.PeriodStart = g.opts.TenantBudget.Limit, p, time.Unix(0, now-now%int64(p)).UTC()
	}
	v, err := bs.Charge(ctx, c)
	switch {
	case err != nil:
		return nil, CodeUnavailable, err
	case v == BudgetRunSpent:
		return nil, CodeBudgetExhausted, NewError(CodeBudgetExhausted,
			"This tool's budget for this run is spent; nothing ran. Do not call it again in this run; tell the user.")
	case v == BudgetTenantSpent:
		return nil, CodeBudgetExhausted, NewError(CodeBudgetExhausted,
			"The account's budget for this period is spent; nothing ran. Do not retry; tell the user it renews at "+
				c.PeriodStart.Add(c.Period).Format(time.RFC3339)+".")
	}
	return c, 0, nil
}

// refund gives back the charge of a call that did not run.
func (g *Guard) refund(ctx context.Context, c *BudgetCharge) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	_ = g.store.(Budgeter).Refund(ctx, c)
}
