package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolguard/toolguard/guard"
)

// Budgets (guard.Budgeter). A tenant's counters live in two keys of its
// slot, named with the other keys of a charged call so that the scripts
// that take and settle a charge follow a moving slot as every script does
// (run's retry of MOVED, ASK and TRYAGAIN):
//
//   - <prefix>{t…}:b, a hash: each run's calls and cost per tool, each
//     period's cost, and what each token took (lua/prelude.lua, Budgets);
//   - <prefix>{t…}:b:due, a sorted set: when each of those fields may be
//     dropped.
//
// Neither has a TTL, so a volatile-* policy never evicts them, as it never
// evicts audit logs; old fields are dropped by the charges themselves,
// four at most per charge: a run's counter Options.TTL after its last
// charge, a period's counter a period after the period ended, a token's
// charge Options.TTL after it was taken (a minute once given back).
//
// A write's charge is taken by its reservation (reserve.lua), in the same
// script, after the checks that answer from the store; its commit gives it
// back when nothing ran (side effect none) and forgets the token once the
// write is committed; a settle or a resolution of a reservation left
// unknown keeps it (the write ran) or gives it back (it did not). A read's
// is taken by the charge script just before the read runs, and given back
// by the refund script, by its token. Each is idempotent per token. Like
// the store's other state changes, charges are refused while the server
// is (ErrEvictionPolicy, ErrEvicted, ErrTooFewReplicas), and not waited on
// by replicas unless Options.Replicas: a failover without them may forget
// the last charges.

var _ guard.Budgeter = (*Store)(nil)

// budgetKeys names the tenant's budget hash and its due set.
func budgetKeys(prefix, tenant string) (hash, due string) {
	tag := prefix + "{t" + enc.EncodeToString([]byte(tenant)) + "}"
	return tag + ":b", tag + ":b:due"
}

// withBudget names the tenant's budget keys after keys, and says so in a.
func (s *Store) withBudget(keys []string, a *scriptArgs, tenant string) []string {
	hash, due := budgetKeys(s.prefix, tenant)
	a.budget = "1"
	return append(keys, hash, due)
}

// packCharge packs a charge as the scripts read it (CHARGE, lua/prelude.lua
// charge): its cost, the run's bounds, the tenant's limit, the run's field
// and the period's ("" for none) and when the period's field may go.
func packCharge(c *guard.BudgetCharge) string {
	var run, period string
	if c.Scope != "" {
		run = "r:" + enc.EncodeToString([]byte(c.Scope)) + ":" + enc.EncodeToString([]byte(c.Tool))
	}
	var due int64
	if c.TenantLimit > 0 {
		start := c.PeriodStart.UnixMilli()
		period, due = "p:"+strconv.FormatInt(start, 10), start+2*ms(c.Period)
	}
	b := make([]byte, 0, 4*9+len(run)+len(period)+2*5+9)
	for _, v := range [...]int64{max(c.Cost, 0), c.MaxCalls, c.MaxCost, c.TenantLimit} {
		b = appendInt(b, v)
	}
	b = appendFields(b, run, period)
	return string(appendInt(b, due))
}

// errChargeVerdict: a charge script's reply the store cannot read.
var errChargeVerdict = errors.New("idem: unexpected reply to a budget charge")

// Charge implements guard.Budgeter for a read: one script checks the
// run's counter of the tool and the tenant's counter of the period and, if
// both have room, charges both under c.Token, so that concurrent calls
// never overspend and a charge sent again takes nothing more.
func (s *Store) Charge(ctx context.Context, c *guard.BudgetCharge) (guard.BudgetVerdict, error) {
	a := s.budgetArgs(c)
	a.charge = packCharge(c)
	reply, err := s.run(ctx, chargeScript, s.withBudget(nil, a, c.TenantID), a.argv())
	if err != nil {
		// (With Options.Replicas, a charge too few replicas have is not
		// taken: the guard gives it back, and the read does not run.)
		return 0, err
	}
	if len(reply) != 2 || reply[0] != "V" {
		return 0, fmt.Errorf("%w: %q", errChargeVerdict, reply)
	}
	switch reply[1] {
	case "0":
		return guard.BudgetTaken, nil
	case "1":
		return guard.BudgetRunSpent, nil
	case "2":
		return guard.BudgetTenantSpent, nil
	case "3":
		return 0, guard.ErrChargeRefunded
	}
	return 0, fmt.Errorf("%w: %q", errChargeVerdict, reply)
}

// Refund implements guard.Budgeter: it gives back what c.Token took.
func (s *Store) Refund(ctx context.Context, c *guard.BudgetCharge) error {
	a := s.budgetArgs(c)
	_, err := s.run(ctx, refundScript, s.withBudget(nil, a, c.TenantID), a.argv())
	if errors.Is(err, ErrNotReplicated) {
		return nil
	}
	return err
}

// budgetArgs are the arguments of a read's charge or refund: its token,
// the guard's time and the retention of its fields.
func (s *Store) budgetArgs(c *guard.BudgetCharge) *scriptArgs {
	return &scriptArgs{now: c.Now.UnixMilli(), token: storedToken(c.Token), leaseMS: ms(releaseHold), ttlMS: s.ttlMS,
		auditTTLMS: s.auditTTLMS, fence: s.fenceArg()}
}
