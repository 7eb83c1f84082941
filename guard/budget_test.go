package guard_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/toolset"
)

type searchIn struct {
	Query string `json:"query"`
	Pages int8   `json:"pages"`
}

// budgetCall is a call of tool in run (its scope), with its own call id.
func budgetCall(p guard.Principal, run, tool, args, id string) guard.Call {
	return guard.Call{Principal: p, Proposal: guard.Proposal{Name: tool, Arguments: []byte(args)},
		Context: guard.ExecutionContext{CallID: id, Scope: run}}
}

// TestBudgets: a tool's bounds per run (executions, and cost priced from
// the input) and a tenant's per period, on the in-memory store. A call
// that would exceed one does not run, is BUDGET_EXHAUSTED with a message
// that says not to retry, and is audited; another run has its own budget;
// a replay of a stored outcome, and an execution that did not start, cost
// nothing.
func TestBudgets(t *testing.T) {
	ran := map[string]int{}
	var failNext bool
	search := toolset.Read("search", "Search the web (paid).", func(_ context.Context, _ *guard.Invocation, in searchIn) (string, error) {
		ran["search"]++
		if failNext {
			failNext = false
			return "", guard.NotStarted(errors.New("provider busy"))
		}
		return "results for " + in.Query, nil
	}, &toolset.Options[searchIn, string]{Budget: &toolset.Budget[searchIn]{MaxCalls: 3, MaxCost: 5,
		CostOf: func(in searchIn) int64 { return int64(in.Pages) }}})
	send := toolset.Write("send", "Send a message.", func(_ context.Context, _ *guard.Invocation, in searchIn) (string, error) {
		ran["send"]++
		return "sent", nil
	}, &toolset.Options[searchIn, string]{Budget: &toolset.Budget[searchIn]{MaxCalls: 1}})
	store := guard.NewMemStore(guard.MemStoreOptions{})
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	g := guard.New(toolset.MustNew(search, send), store, guard.Options{Clock: guard.ClockFunc(func() time.Time { return now }),
		TenantBudget: guard.TenantBudget{Limit: 8, Period: 24 * time.Hour}})
	p := guard.Principal{TenantID: "t1", SubjectID: "u1"}
	n := 0
	do := func(run, tool, args string) *guard.Result {
		n++
		res, err := g.Dispatch(context.Background(), budgetCall(p, run, tool, args, "c"+strconv.Itoa(n)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := func(res *guard.Result, code guard.Code, what string) {
		t.Helper()
		if res.Code != code {
			t.Fatalf("%s: %s %q, want %s", what, res.Code, res.Message, code)
		}
	}
	one := `{"query":"a","pages":1}`
	want(do("r1", "search", one), guard.CodeOK, "first search")
	want(do("r1", "search", `{"query":"b","pages":3}`), guard.CodeOK, "second search (cost 3: 4 of 5)")
	res := do("r1", "search", `{"query":"c","pages":2}`)
	want(res, guard.CodeBudgetExhausted, "a search that would cost 6 of 5")
	if res.Code.Recovery() != guard.RecoveryNone || res.Message == guard.CodeBudgetExhausted.DefaultMessage() {
		t.Errorf("refusal: recovery %s, message %q", res.Code.Recovery(), res.Message)
	}
	failNext = true
	want(do("r1", "search", one), guard.CodeTimeoutBeforeExecute, "a search that did not start")
	want(do("r1", "search", one), guard.CodeOK, "third search: the one that did not start cost nothing")
	want(do("r1", "search", `{"query":"d","pages":0}`), guard.CodeBudgetExhausted, "a fourth search in the run")

	// Writes: a replay of the stored outcome costs nothing.
	first := budgetCall(p, "r1", "send", one, "w1")
	for i := range 3 {
		res, err := g.Dispatch(context.Background(), first)
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("send %d: %v %v", i, res, err)
		}
	}
	want(do("r1", "send", `{"query":"other","pages":1}`), guard.CodeBudgetExhausted, "a second send in the run")

	// Another run has its own budget, until the tenant's runs out: 5 of 8
	// were spent in r1 (searches 1, 3, 1; sends cost nothing).
	want(do("r2", "search", `{"query":"e","pages":3}`), guard.CodeOK, "a search in r2 (8 of 8)")
	res = do("r2", "search", one)
	want(res, guard.CodeBudgetExhausted, "the tenant's budget spent")
	if res.Message == "" || res.Code.Recovery() != guard.RecoveryNone {
		t.Errorf("tenant refusal: %q", res.Message)
	}
	// The next day, the tenant's budget is whole again.
	now = now.Add(24 * time.Hour)
	want(do("r3", "search", one), guard.CodeOK, "a search the next day")
	if ran["search"] != 6 || ran["send"] != 1 { // the one that did not start was called
		t.Errorf("ran %v, want 6 searches and 1 send", ran)
	}
	// Every refusal is audited.
	if refused := guardtest.AuditedCodes(t, store, "t1")[guard.CodeBudgetExhausted]; refused != 4 {
		t.Errorf("%d refusals audited, want 4", refused)
	}
}

// TestBudgetWithoutBudgeter: a call with a budget on a store that keeps
// none fails closed, UNAVAILABLE, and does not run.
func TestBudgetWithoutBudgeter(t *testing.T) {
	ran := 0
	tool := toolset.Read("paid", "A paid read.", func(context.Context, *guard.Invocation, in) (string, error) {
		ran++
		return "x", nil
	}, &toolset.Options[in, string]{Budget: &toolset.Budget[in]{MaxCalls: 1}})
	g := guard.New(toolset.MustNew(tool), struct{ guard.Store }{guard.NewMemStore(guard.MemStoreOptions{})}, guard.Options{})
	res, err := g.Dispatch(context.Background(), budgetCall(guard.Principal{TenantID: "t", SubjectID: "u"}, "r", "paid", `{"n":1}`, "c1"))
	if err != nil || res.Code != guard.CodeUnavailable || ran != 0 {
		t.Errorf("dispatch = %v, %v; ran %d", res, err, ran)
	}
}
