package idem

import (
	"context"
	_ "embed"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
)

//go:embed lua/budget.lua
var budgetSrc string

// budgetScript takes and gives back budget charges: one script, one round
// trip, both counters of the tenant's slot checked and changed together.
var budgetScript = redis.NewScript(budgetSrc)

var _ guard.Budgeter = (*Store)(nil)

// Charge implements guard.Budgeter: one script checks the run's counter of
// the tool and the tenant's counter of the period and, if both have room,
// charges both, so that concurrent calls never overspend. Like the store's
// state changes it is refused while the server is (ErrEvictionPolicy,
// ErrEvicted, ErrTooFewReplicas). Counters are not waited on by replicas
// (Options.Replicas): a failover may forget the last charges.
func (s *Store) Charge(ctx context.Context, c *guard.BudgetCharge) (guard.BudgetVerdict, error) {
	if err := s.admit(ctx); err != nil {
		return 0, err
	}
	v, err := s.budget(ctx, "charge", c)
	if err != nil {
		return 0, err
	}
	switch v {
	case 1:
		return guard.BudgetRunSpent, nil
	case 2:
		return guard.BudgetTenantSpent, nil
	}
	return guard.BudgetTaken, nil
}

// Refund implements guard.Budgeter.
func (s *Store) Refund(ctx context.Context, c *guard.BudgetCharge) error {
	_, err := s.budget(ctx, "refund", c)
	return err
}

func (s *Store) budget(ctx context.Context, op string, c *guard.BudgetCharge) (int64, error) {
	tag := s.prefix + "{t" + enc.EncodeToString([]byte(c.TenantID)) + "}"
	keys := []string{tag + ":b:" + enc.EncodeToString([]byte(c.Scope)) + ":" + enc.EncodeToString([]byte(c.Tool)),
		tag + ":bt:" + strconv.FormatInt(c.PeriodStart.UnixMilli(), 10)}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	args := []any{op, c.Cost, c.MaxCalls, c.MaxCost, c.TenantLimit, s.ttlMS, (2 * c.Period).Milliseconds(),
		flag(c.Scope != ""), flag(c.TenantLimit > 0)}
	return budgetScript.Run(ctx, s.rdb, keys, args...).Int64()
}
