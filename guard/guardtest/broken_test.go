package guardtest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
)

// The suite's own test: a deliberately broken store fails every test of the
// kit, each naming its rule, and none hangs. Failing tests cannot run in
// this process (they would fail it), so the test binary runs itself with
// brokenEnv naming the breakage, and this test reads the child's verdicts.

const brokenEnv = "GUARDTEST_BROKEN_STORE"

// unreachable is a store that never does its job: every call errs.
type unreachable struct{ *guard.MemStore }

var errDown = errors.New("broken store: down")

func (unreachable) Finish(context.Context, *guard.Entry) (*guard.Result, error) { return nil, errDown }
func (unreachable) Reserve(context.Context, *guard.Entry, time.Duration) (*guard.Result, error) {
	return nil, errDown
}
func (unreachable) Commit(context.Context, *guard.Entry) (*guard.Result, error) { return nil, errDown }
func (unreachable) Status(context.Context, *guard.Entry) (*guard.Result, *guard.Pending, error) {
	return nil, nil, errDown
}

// neverReserves answers every reservation IN_PROGRESS, so a write never
// runs: the tests that wait for a write to start must give up, not hang.
type neverReserves struct{ *guard.MemStore }

func (neverReserves) Reserve(context.Context, *guard.Entry, time.Duration) (*guard.Result, error) {
	return &guard.Result{Code: guard.CodeInProgress, Delivery: guard.DeliveryFresh, RetryAfter: time.Second}, nil
}

// forgetfulBudgets keeps budgets as toolguard did before issue 40: a
// charge is not named by its token (each one sent is taken again) and a
// reservation ignores the charge it carries.
type forgetfulBudgets struct {
	*guard.MemStore
	n atomic.Int64
}

func (s *forgetfulBudgets) Charge(ctx context.Context, c *guard.BudgetCharge) (guard.BudgetVerdict, error) {
	again := *c
	again.Token = c.Token + "#" + strconv.FormatInt(s.n.Add(1), 10)
	return s.MemStore.Charge(ctx, &again)
}

func (s *forgetfulBudgets) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	plain := *e
	plain.Charge = nil
	return s.MemStore.Reserve(ctx, &plain, lease)
}

// TestBrokenStoreChild runs the kit against the broken store the parent
// names; it does nothing in an ordinary run.
func TestBrokenStoreChild(t *testing.T) {
	switch os.Getenv(brokenEnv) {
	case "unreachable":
		guardtest.TestStore(t, func(*testing.T) guard.AuditStore { return unreachable{guard.NewMemStore(guard.MemStoreOptions{})} })
	case "never-reserves":
		guardtest.TestStore(t, func(*testing.T) guard.AuditStore { return neverReserves{guard.NewMemStore(guard.MemStoreOptions{})} })
	case "forgetful-budgets":
		guardtest.TestStore(t, func(*testing.T) guard.AuditStore {
			return &forgetfulBudgets{MemStore: guard.NewMemStore(guard.MemStoreOptions{})}
		})
	}
}

var failLine = regexp.MustCompile(`--- FAIL: TestBrokenStoreChild/(\w+) \(([0-9.]+)s\)`)

// runBroken runs the kit against a broken store in a child process and
// returns each failed test's duration, and the child's output.
func runBroken(t *testing.T, breakage, run string) (map[string]float64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pattern := "^TestBrokenStoreChild$"
	if run != "" {
		pattern += "/^(" + run + ")$"
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), brokenEnv+"="+breakage)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("the kit passed a broken store (%s):\n%s", breakage, out.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("the kit hung on a broken store (%s):\n%s", breakage, out.String())
	}
	failed := map[string]float64{}
	for _, m := range failLine.FindAllStringSubmatch(out.String(), -1) {
		secs, _ := strconv.ParseFloat(m[2], 64)
		failed[m[1]] = secs
	}
	return failed, out.String()
}

// TestBrokenStoreFailsEveryTestNamingTheRule: a store that never answers
// fails all of the kit's tests, each quickly and with its rule named.
func TestBrokenStoreFailsEveryTestNamingTheRule(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("the child runs TestBrokenStoreChild only")
	}
	failed, out := runBroken(t, "unreachable", "")
	names := guardtest.TestNames()
	for _, name := range names {
		secs, ok := failed[name]
		if !ok {
			t.Errorf("%s did not fail on a store that never answers", name)
			continue
		}
		if secs > guardtest.CallTimeout.Seconds() {
			t.Errorf("%s took %.1fs to fail", name, secs)
		}
	}
	if n := strings.Count(out, "the rule: "); n != len(names) {
		t.Errorf("%d failures named their rule, want %d:\n%s", n, len(names), out)
	}
}

// TestBrokenStoreNeverHangs: the tests that wait for a write to start (and
// hung on such a store before) give up within CallTimeout and name the rule.
func TestBrokenStoreNeverHangs(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("the child runs TestBrokenStoreChild only")
	}
	failed, out := runBroken(t, "never-reserves", "InProgressWhileHeld|LeaseExpiryMakesWriteUnknown")
	for _, name := range []string{"InProgressWhileHeld", "LeaseExpiryMakesWriteUnknown"} {
		secs, ok := failed[name]
		if !ok {
			t.Errorf("%s did not fail on a store that never reserves:\n%s", name, out)
			continue
		}
		if secs > guardtest.CallTimeout.Seconds()+2 {
			t.Errorf("%s took %.1fs to fail", name, secs)
		}
	}
	if !strings.Contains(out, "the rule: a key reserved under a live lease is IN_PROGRESS") {
		t.Errorf("the failure does not name the rule:\n%s", out)
	}
}

// TestBrokenBudgetsFail: a store that keeps budgets as toolguard did before
// issue 40 (charges not named by their token, not taken by the
// reservation) fails each of the budget tests, naming its rule.
func TestBrokenBudgetsFail(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("the child runs TestBrokenStoreChild only")
	}
	tests := []string{"ChargeOncePerToken", "ReplaysTakeNoCharge", "ChargeSettledWithReservation"}
	failed, out := runBroken(t, "forgetful-budgets", strings.Join(tests, "|"))
	for _, name := range tests {
		if _, ok := failed[name]; !ok {
			t.Errorf("%s did not fail on a store that forgets charges:\n%s", name, out)
		}
	}
	if n := strings.Count(out, "the rule: "); n != len(tests) {
		t.Errorf("%d failures named their rule, want %d:\n%s", n, len(tests), out)
	}
}
