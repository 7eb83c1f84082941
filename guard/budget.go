package guard

import (
	"context"
	"errors"
	"time"
)

// Budgets. A tool may bound what one run spends on it (ToolSpec.Budget: a
// number of executions and a cost), and the host may bound what a tenant
// spends in a period, across tools (Options.TenantBudget). The store keeps
// the counters (Budgeter) with the same atomicity as the dispatch: a charge
// is taken, all bounds at once, only if every bound still has room, so
// concurrent calls of one tenant never overspend. A call that would exceed
// a bound does not run: it is answered BUDGET_EXHAUSTED (failed, nothing
// ran, recovery none: the model is told the budget is spent and not to
// retry), and audited like every answer.
//
// A charge pays for one execution, and only for one that may have started:
// the budgets spent are the executions that ran, exactly, whatever the
// network does to the store's replies. A write's charge is taken by its
// reservation, in the same atomic step and after the checks that answer
// from the store: a replay, an answer from the store (IN_PROGRESS, an
// unknown outcome) and a conflict take none, so they never hold budget a
// fresh write needs. It is settled with the reservation: kept when the
// write may have run, given back when it did not (Budgeter). A read runs
// on every dispatch (its answer may then come from the store, but it ran),
// so each read that starts is charged; its charge is taken just before it
// runs, under a token of its own, and given back if it did not start.
// Tools without a budget, with no tenant budget set, take no extra step.

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
	// Token names the charge: a write's reservation token (Entry.Token),
	// a read's a token of its own, unique to the dispatch. A Budgeter takes
	// one charge per token.
	Token    string
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
	// Now is the guard's time of the dispatch; a store keeps its counters
	// and tokens by it (retention only).
	Now time.Time
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

// Refusal is the message of the BUDGET_EXHAUSTED answer to a charge that
// got verdict v (BudgetRunSpent or BudgetTenantSpent): what a Budgeter's
// Reserve answers, and the guard for a read.
func (c *BudgetCharge) Refusal(v BudgetVerdict) string {
	if v == BudgetTenantSpent {
		return "The account's budget for this period is spent; nothing ran. Do not retry; tell the user it renews at " +
			c.PeriodStart.Add(c.Period).Format(time.RFC3339) + "."
	}
	return "This tool's budget for this run is spent; nothing ran. Do not call it again in this run; tell the user."
}

// Budgeter is a store that keeps budgets (idem.Store and MemStore
// are; Store's doc numbers these rules, 23-26, and guard/guardtest checks
// them). A store that implements it takes the charges of writes in its
// Store methods too:
//
//   - Bounds: a charge is taken only if every bound it names has room (the
//     run's MaxCalls and MaxCost for Scope and Tool, the tenant's
//     TenantLimit for the period starting at PeriodStart), all at once,
//     atomically with every other charge of the tenant. The run's counter
//     outlives its last charge by the store's retention at least; the
//     tenant's counter of a period, the period's end.
//   - A write's charge: Reserve of an entry with a Charge applies its
//     checks first (call id, key, grant: what they answer takes no charge),
//     then takes the charge under e.Token in the same atomic step as the
//     reservation; when a bound has no room it reserves nothing, spends no
//     grant, audits and answers BUDGET_EXHAUSTED (fresh, with
//     Charge.Refusal(verdict)), and binds a new call id to the fingerprint
//     alone. A copy of the reservation (the same token) takes nothing more.
//   - Settling it: the charge of a token is given back, at most once, when
//     the token's reservation ends without the write having run: a Commit
//     whose entry's SideEffect is none (a not-started outcome, a release),
//     a Settle that finds no receipt and releases the key. It is kept by a
//     Commit whose SideEffect is yes or unknown, and by a Settle that finds
//     the receipt. A reservation whose lease ran out keeps it until a Settle
//     decides.
//   - A read's charge: Charge takes c under c.Token, or answers which bound
//     has no room and takes nothing. Sent again with the same token (a
//     client's retry after a lost reply) it answers BudgetTaken and takes
//     nothing more. Refund gives back the charge c.Token took, at most
//     once, and leaves the token spent: a Charge of it that arrives later
//     takes nothing and returns ErrChargeRefunded.
type Budgeter interface {
	Charge(ctx context.Context, c *BudgetCharge) (BudgetVerdict, error)
	Refund(ctx context.Context, c *BudgetCharge) error
}

// ErrChargeRefunded is what a Budgeter's Charge returns for a token whose
// charge was given back: a late copy of a charge its dispatch gave up on.
var ErrChargeRefunded = errors.New("guard: the charge's token was given back")

// ErrNoBudgeter is the reason a call with a budget is UNAVAILABLE on a
// store that keeps no budgets: it fails closed rather than run unbounded.
var ErrNoBudgeter = errors.New("guard: the store keeps no budgets (guard.Budgeter): a call with a budget cannot run")

// refundTimeout bounds giving a read's charge back, which must outlive the
// caller's context.
const refundTimeout = 5 * time.Second

// budgetCharge prices the charge of a call about to execute: nil when no
// budget applies. A call that cannot be priced, or whose store keeps no
// budgets, gets its error code in code, and nothing runs.
func (g *Guard) budgetCharge(inv *Invocation) (c *BudgetCharge, code Code, err error) {
	spec := inv.tool.Spec()
	b := spec.Budget
	run := inv.Context.Scope != "" && (b.MaxCalls > 0 || b.MaxCost > 0)
	tenant := g.opts.TenantBudget.Limit > 0
	if !run && !tenant {
		return nil, 0, nil
	}
	if _, ok := g.store.(Budgeter); !ok {
		return nil, CodeUnavailable, ErrNoBudgeter
	}
	cost := b.Cost
	if b.CostOf != nil {
		if perr := safeRun(func() error { cost = b.CostOf(inv.Input); return nil }); perr != nil {
			return nil, CodeUnavailable, perr
		}
	}
	c = &BudgetCharge{TenantID: inv.Principal.TenantID, Tool: spec.Name, Cost: max(cost, 0), Now: inv.Now}
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
	return c, 0, nil
}

// chargeRead takes a read's charge under a token of its own. A charge the
// store refused is answered with the call's error code in code, and
// nothing runs; one whose reply was lost is given back.
func (g *Guard) chargeRead(ctx context.Context, c *BudgetCharge) (code Code, err error) {
	c.Token = newToken()
	v, err := g.store.(Budgeter).Charge(ctx, c)
	switch {
	case err != nil:
		// Taken with its reply lost, perhaps: give it back by its token
		// (unless the store refused before sending anything).
		if !errors.Is(err, ErrStoreRefused) {
			g.refund(ctx, c)
		}
		return CodeUnavailable, err
	case v != BudgetTaken:
		return CodeBudgetExhausted, NewError(CodeBudgetExhausted, c.Refusal(v))
	}
	return 0, nil
}

// refund gives back the charge of a read that did not run, by its token,
// retried within refundTimeout, which outlives the caller's context.
func (g *Guard) refund(ctx context.Context, c *BudgetCharge) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		err := g.store.(Budgeter).Refund(ctx, c)
		if err == nil || errors.Is(err, ErrStoreRefused) || !pause(ctx, time.Duration(attempt+1)*20*time.Millisecond) {
			return
		}
	}
}
