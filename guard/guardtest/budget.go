package guardtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// The budget tests (guard.Budgeter; rules 23–26). A store that
// keeps no budgets skips them: a guard with a budget then fails closed
// (guard.ErrNoBudgeter), which the guard's own tests check.

// budgetLimit is the tenant budget of the budget tests: so many writes
// of cost 1 a day.
const budgetLimit = 5

// budgeter returns the world's store as a guard.Budgeter, or skips.
func budgeter(t *testing.T, w *World) guard.Budgeter {
	t.Helper()
	b, ok := w.Store.(guard.Budgeter)
	if !ok {
		t.Skip("the store keeps no budgets (guard.Budgeter)")
	}
	return b
}

// budgeted gives the world's guard a tenant budget of budgetLimit a day,
// every execution costing 1.
func budgeted(t *testing.T, w *World) guard.Budgeter {
	b := budgeter(t, w)
	w.Guard = guard.New(w.Down.Tools(), w.Store, guard.Options{Clock: guard.ClockFunc(w.Now), Signer: w.Signer, Lease: Lease,
		TenantBudget: guard.TenantBudget{Limit: budgetLimit, Period: 24 * time.Hour}})
	return b
}

// tenantCharge is a charge of cost 1 against tenant's budget of the
// budget tests, as the guard prices it at the world's time.
func (w *World) tenantCharge(tenant, token string) *guard.BudgetCharge {
	now := w.Now()
	const day = 24 * time.Hour
	return &guard.BudgetCharge{Token: token, TenantID: tenant, Tool: "put", Cost: 1, TenantLimit: budgetLimit,
		PeriodStart: now.Truncate(day), Period: day, Now: now}
}

// room returns how many more charges of cost 1 the tenant's budget takes,
// measured by charging fresh tokens until one is refused and giving them
// all back: the budget is as it was.
func room(t *testing.T, w *World, b guard.Budgeter, tenant string) int {
	t.Helper()
	ctx := context.Background()
	var taken []*guard.BudgetCharge
	defer func() {
		for _, c := range taken {
			if err := b.Refund(ctx, c); err != nil {
				t.Errorf("refund %s: %v", c.Token, err)
			}
		}
	}()
	for i := range budgetLimit + 1 {
		c := w.tenantCharge(tenant, fmt.Sprintf("probe-%d-%d", w.seq.Add(1), i))
		v, err := b.Charge(ctx, c)
		if err != nil {
			t.Fatalf("charge: %v", err)
		}
		if v != guard.BudgetTaken {
			if v != guard.BudgetTenantSpent {
				t.Fatalf("charge without a run: verdict %d, want BudgetTenantSpent", v)
			}
			return i
		}
		taken = append(taken, c)
	}
	t.Fatalf("the tenant's budget of %d took %d charges", budgetLimit, budgetLimit+1)
	return 0
}

// wantRoom checks the room left in the tenant's budget.
func wantRoom(t *testing.T, w *World, b guard.Budgeter, tenant string, want int, after string) {
	t.Helper()
	if got := room(t, w, b, tenant); got != want {
		t.Fatalf("after %s: room for %d charges, want %d (%d taken)", after, got, want, budgetLimit-want)
	}
}

// testChargeOncePerToken: a charge sent again with its token (a client's
// retry after a lost reply) takes nothing more, whether it is a read's
// Charge or a write's Reserve; a token given back stays spent, and a late
// copy of its charge takes nothing (rules 24 and 25).
func testChargeOncePerToken(t *testing.T, w *World) {
	b := budgeter(t, w)
	ctx := context.Background()
	const tenant = "tenant-c" // writeEntry's
	read := w.tenantCharge(tenant, "read-token")
	for i := range 3 {
		if v, err := b.Charge(ctx, read); err != nil || v != guard.BudgetTaken {
			t.Fatalf("charge #%d of one token: %d, %v; want BudgetTaken", i+1, v, err)
		}
	}
	wantRoom(t, w, b, tenant, budgetLimit-1, "one token charged three times")

	// A write's charge rides on its reservation: a copy of the reservation
	// takes nothing more, and its commit (it ran) keeps it.
	e := writeEntry(w, 1, "write-token")
	e.Charge = w.tenantCharge(tenant, e.Token)
	for i := range 2 {
		if answer, err := w.Store.Reserve(ctx, e, Lease); err != nil || answer != nil {
			t.Fatalf("reserve #%d with the same token: %v, %v; want the reservation", i+1, answer, err)
		}
	}
	wantRoom(t, w, b, tenant, budgetLimit-2, "a reservation sent twice")
	e.Code, e.Data = guard.CodeOK, []byte(`{"n":1}`)
	for i := range 2 {
		if res, err := w.Store.Commit(ctx, e); err != nil || res.Code != guard.CodeOK {
			t.Fatalf("commit #%d: %v, %v", i+1, res, err)
		}
	}
	wantRoom(t, w, b, tenant, budgetLimit-2, "its commit, sent twice")

	// Given back once, however often it is asked; a late copy of the
	// charge then takes nothing.
	for range 2 {
		if err := b.Refund(ctx, read); err != nil {
			t.Fatalf("refund: %v", err)
		}
	}
	wantRoom(t, w, b, tenant, budgetLimit-1, "the read's charge given back twice")
	if v, err := b.Charge(ctx, read); !errors.Is(err, guard.ErrChargeRefunded) {
		t.Fatalf("a late copy of a charge given back: %d, %v; want guard.ErrChargeRefunded", v, err)
	}
	wantRoom(t, w, b, tenant, budgetLimit-1, "a late copy of a charge given back")
}

// testReplaysTakeNoCharge: near the limit, what the store answers — a
// replay, IN_PROGRESS, a conflict — takes no charge, so a fresh write
// still runs while budget is left, and the one after it is
// BUDGET_EXHAUSTED, audited, with nothing run (rule 24).
func testReplaysTakeNoCharge(t *testing.T, w *World) {
	b := budgeted(t, w)
	args := func(i int) string { return fmt.Sprintf(`{"key":"k%d","value":"v"}`, i) }
	for i := range budgetLimit - 2 {
		Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(i), CallID: fmt.Sprintf("c%d", i), Key: fmt.Sprintf("idem-%d", i)}), guard.CodeOK, guard.DeliveryFresh)
	}
	// One more write holds its reservation while the others come.
	entered, release := w.Down.Block()
	defer release()
	held := make(chan *guard.Result, 1)
	go func() {
		res, err := w.TryDispatch(alice, Req{Tool: "put", Args: args(90), CallID: "held", Key: "idem-held"})
		if err != nil {
			t.Error(err)
		}
		held <- res
	}()
	<-entered
	for round := range 3 {
		for i := range budgetLimit - 2 {
			Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(i), CallID: fmt.Sprintf("c%d", i)}), guard.CodeOK, guard.DeliveryLocalReplay)
			Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(i), CallID: fmt.Sprintf("r%d-%d", round, i), Key: fmt.Sprintf("idem-%d", i)}), guard.CodeOK, guard.DeliveryLocalReplay)
		}
		Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(90), CallID: fmt.Sprintf("h%d", round), Key: "idem-held"}), guard.CodeInProgress, guard.DeliveryFresh)
		Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(91), CallID: fmt.Sprintf("x%d", round), Key: "idem-0"}), guard.CodeIdempotencyConflict, guard.DeliveryFresh)
		Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(92), CallID: "c0"}), guard.CodeCallIDConflict, guard.DeliveryFresh)
	}
	release()
	Want(t, <-held, guard.CodeOK, guard.DeliveryFresh)
	// One execution is left, and a fresh write gets it.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(50), CallID: "fresh", Key: "idem-fresh"}), guard.CodeOK, guard.DeliveryFresh)
	spent := w.Dispatch(t, alice, Req{Tool: "put", Args: args(51), CallID: "spent", Key: "idem-spent"})
	Want(t, spent, guard.CodeBudgetExhausted, guard.DeliveryFresh)
	c := w.tenantCharge(alice.TenantID, "")
	if want := c.Refusal(guard.BudgetTenantSpent); spent.Message != want {
		t.Fatalf("BUDGET_EXHAUSTED says %q, want %q", spent.Message, want)
	}
	// Not replayed: asked again, it is refused again, and nothing runs.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args(51), CallID: "spent", Key: "idem-spent"}), guard.CodeBudgetExhausted, guard.DeliveryFresh)
	if n := w.Down.Writes(); n != budgetLimit {
		t.Fatalf("%d side effects with a budget of %d, want %d", n, budgetLimit, budgetLimit)
	}
	wantRoom(t, w, b, alice.TenantID, 0, "the budget spent")
	if refused := AuditedCodes(t, w.Store, alice.TenantID)[guard.CodeBudgetExhausted]; refused != 2 {
		t.Fatalf("%d BUDGET_EXHAUSTED records, want 2", refused)
	}
	if _, err := guard.VerifyAudit(context.Background(), w.Store, alice.TenantID); err != nil {
		t.Fatal(err)
	}
}

// testChargeSettledWithReservation: a write's charge is kept if it may
// have run and given back if it did not, by what ends its reservation
// (rule 25): a tool that did not start, a release after a lost
// reply, a status query whose receipt finds nothing after the lease; and
// kept by an unknown outcome and by a found receipt.
func testChargeSettledWithReservation(t *testing.T, w *World) {
	b := budgeted(t, w)
	ctx := context.Background()
	args := `{"key":"a","value":"1"}`
	tenant := alice.TenantID

	w.Down.FailNext(guard.CodeTimeoutBeforeExecute, true)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c1", Key: "idem-1"}), guard.CodeTimeoutBeforeExecute, guard.DeliveryFresh)
	wantRoom(t, w, b, tenant, budgetLimit, "a write that did not start")

	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c2", Key: "idem-2"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	wantRoom(t, w, b, tenant, budgetLimit-1, "a write whose outcome is unknown")
	w.Advance(Lease + time.Second)
	Want(t, w.StatusOf(t, alice, "c2", Req{Tool: "put", Key: "idem-2"}), guard.CodeOK, guard.DeliveryReceiptReconciled)
	wantRoom(t, w, b, tenant, budgetLimit-1, "its receipt found")

	// A reservation whose reply was lost, released by its token: given
	// back; a late copy of it reserves and takes nothing.
	fp := guard.Fingerprint("put", []byte(args))
	entry := func(call, key, token string) *guard.Entry {
		e := &guard.Entry{TenantID: tenant, SubjectID: alice.SubjectID, CallID: call, OperationID: call,
			IdempotencyKey: "k:" + key, Tool: "put", Fingerprint: fp, Effect: guard.Write, Now: w.Now(),
			SideEffect: guard.SideEffectNone, Token: token, AuditBody: []byte(`{"contract":"tool-audit-v2"}`)}
		e.Charge = w.tenantCharge(tenant, token)
		return e
	}
	lost := entry("c3", "idem-3", "lost-token")
	if answer, err := w.Store.Reserve(ctx, lost, Lease); err != nil || answer != nil {
		t.Fatalf("reserve: %v, %v", answer, err)
	}
	wantRoom(t, w, b, tenant, budgetLimit-2, "a reservation")
	lost.Code = guard.CodeUnavailable
	if res, err := w.Store.Commit(ctx, lost); err != nil || res.Code != guard.CodeUnavailable {
		t.Fatalf("release: %v, %v", res, err)
	}
	wantRoom(t, w, b, tenant, budgetLimit-1, "its release")
	if answer, err := w.Store.Reserve(ctx, lost, Lease); err != nil || answer == nil {
		t.Fatalf("a late copy of the released reservation: %v, %v; want an answer", answer, err)
	}
	wantRoom(t, w, b, tenant, budgetLimit-1, "a late copy of the released reservation")

	// A reservation nobody released (its holder gone): the charge is held
	// through the lease, and given back by a status query whose receipt
	// finds nothing after it.
	gone := entry("c4", "idem-4", "gone-token")
	if answer, err := w.Store.Reserve(ctx, gone, Lease); err != nil || answer != nil {
		t.Fatalf("reserve: %v, %v", answer, err)
	}
	Want(t, w.StatusOf(t, alice, "c4", Req{Tool: "put", Key: "idem-4"}), guard.CodeInProgress, guard.DeliveryFresh)
	wantRoom(t, w, b, tenant, budgetLimit-2, "a reservation in its lease")
	w.Advance(Lease + time.Second)
	Want(t, w.StatusOf(t, alice, "c4", Req{Tool: "put", Key: "idem-4"}), guard.CodeNotFound, guard.DeliveryFresh)
	wantRoom(t, w, b, tenant, budgetLimit-1, "its receipt absent after the lease")
	Want(t, w.StatusOf(t, alice, "c4", Req{Tool: "put", Key: "idem-4"}), guard.CodeNotFound, guard.DeliveryFresh)
	wantRoom(t, w, b, tenant, budgetLimit-1, "a second status query")

	// What ran is what was charged.
	Want(t, w.Dispatch(t, alice, Req{Tool: "put", Args: args, CallID: "c4", Key: "idem-4"}), guard.CodeOK, guard.DeliveryFresh)
	if got, want := budgetLimit-room(t, w, b, tenant), w.Down.Writes(); got != want {
		t.Fatalf("%d charges kept, %d executions", got, want)
	}
}
