package agentloop_test

import (
	"context"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/toolset"
)

// TestRunBudget: a paid tool allows two executions per run; a model that
// calls it a third time in the run is told the budget is spent (and not to
// retry) and nothing runs; a new run has its own two.
func TestRunBudget(t *testing.T) {
	f := newFake(t, "responses",
		step{calls: []stepCall{{"c1", "search", `{"service":"a"}`}, {"c2", "search", `{"service":"b"}`}}},
		step{calls: []stepCall{{"c3", "search", `{"service":"c"}`}}},
		step{text: "done"},
		step{calls: []stepCall{{"c4", "search", `{"service":"d"}`}}},
		step{text: "done again"})
	ran := 0
	tools := toolset.MustNew(toolset.Read("search", "Search (paid).", func(context.Context, *guard.Invocation, frameworktest.VaultIn) (string, error) {
		ran++
		return "found", nil
	}, &toolset.Options[frameworktest.VaultIn, string]{Budget: &toolset.Budget[frameworktest.VaultIn]{MaxCalls: 2}}))
	l := agentloop.New(f.model(), tools, agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{})})
	for i, want := range []int{2, 3} {
		res, err := l.Run(testCtx(t), user1, "search")
		if err != nil || res.Status != agentloop.StatusCompleted {
			t.Fatalf("run %d: %v, %v", i, res, err)
		}
		if ran != want {
			t.Fatalf("after run %d the tool ran %d times, want %d", i, ran, want)
		}
	}
	results := f.results()
	if len(results) < 3 || len(results[2]) != 1 || results[2][0].Code != guard.CodeBudgetExhausted ||
		results[2][0].Code.Recovery() != guard.RecoveryNone {
		t.Fatalf("the third call's result = %v, want BUDGET_EXHAUSTED", results)
	}
	if got := results[4]; len(got) != 1 || got[0].Code != guard.CodeOK {
		t.Errorf("the next run's call = %v, want OK", got)
	}
}
