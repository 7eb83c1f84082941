package frameworktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/toolset"
)

// direct carries each step straight to the guard, its result in the
// Responses API's shape: the host a framework's Connect stands in for.
var direct = cases.Direct(cases.Adapters["responses"])

// recorder is a test whose errors are recorded, not reported.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// tally runs SeedSuite on connect with its errors recorded and its
// printed line captured.
func tally(t *testing.T, connect cases.Connect) (passed, failed int, errs []string, printed string) {
	var b strings.Builder
	stdout = &b
	defer func() { stdout = nil }()
	r := &recorder{TB: t}
	passed, failed = SeedSuite(r, connect)
	return passed, failed, r.errs, b.String()
}

// TestSeedSuite: carried straight to the guard, all 18 cases pass, and
// the tally is printed as the modules' suites print it.
func TestSeedSuite(t *testing.T) {
	passed, failed, errs, printed := tally(t, direct)
	if passed != SeedCases || failed != 0 || len(errs) != 0 {
		t.Errorf("SeedSuite = %d passed, %d failed, errors %q; want %d, 0, none", passed, failed, errs, SeedCases)
	}
	if want := "seed suite: 18 passed, 0 failed\n"; printed != want {
		t.Errorf("printed %q, want %q", printed, want)
	}
}

// TestSeedSuiteFails: a host that answers wrong fails every case, each
// with its mismatches, and the suite as a whole.
func TestSeedSuiteFails(t *testing.T) {
	wrong := func(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (cases.Carry, func(), error) {
		return func(context.Context, guard.Call, *guard.StatusCall) (string, error) {
			return `{"code":"OK"}`, nil
		}, func() {}, nil
	}
	broken := func(context.Context, *guard.Guard, *toolset.Set, guard.Principal) (cases.Carry, func(), error) {
		return nil, nil, errors.New("framework down")
	}
	for name, connect := range map[string]cases.Connect{"wrong": wrong, "broken": broken} {
		passed, failed, errs, printed := tally(t, connect)
		if passed != 0 || failed != SeedCases {
			t.Errorf("%s: SeedSuite = %d passed, %d failed, want 0 and %d", name, passed, failed, SeedCases)
		}
		if printed != "seed suite: 0 passed, 18 failed\n" {
			t.Errorf("%s: printed %q", name, printed)
		}
		if len(errs) <= SeedCases || !strings.Contains(errs[len(errs)-1], "want 18 and 0") {
			t.Errorf("%s: errors %q, want one per case at least and the suite's", name, errs)
		}
	}
}

func TestStatusArguments(t *testing.T) {
	if got := StatusArguments(&guard.StatusCall{OperationID: "op_1"}); got["operation_id"] != "op_1" || got["tool"] != nil || len(got) != 2 {
		t.Errorf("without a tool: %v", got)
	}
	if got := StatusArguments(&guard.StatusCall{OperationID: "op_1", Tool: "t"}); got["tool"] != "t" {
		t.Errorf("with a tool: %v", got)
	}
}

// TestStepCall: the hook sets the step's ids and grant, and keeps the
// framework's call id; without a step it changes nothing.
func TestStepCall(t *testing.T) {
	var step guard.Call
	step.Context.ResponseID, step.Context.OperationID, step.Context.IdempotencyKey, step.Context.CallID = "resp", "op", "key", "step-call"
	step.Approval = "grant"
	var c guard.Call
	c.Context.CallID = "framework-call"
	StepCall(WithStep(context.Background(), step), &c)
	if c.Context.ResponseID != "resp" || c.Context.OperationID != "op" || c.Context.IdempotencyKey != "key" || c.Approval != "grant" || c.Context.CallID != "framework-call" {
		t.Errorf("StepCall set %+v", c)
	}
	var untouched guard.Call
	StepCall(context.Background(), &untouched)
	if untouched.Context.OperationID != "" || untouched.Approval != "" {
		t.Errorf("without a step: %+v", untouched)
	}
}

// TestStep: Apply sets the step's operation id, idempotency key and
// grant, and keeps the rest of the call.
func TestStep(t *testing.T) {
	var s Step
	var call guard.Call
	call.Context.OperationID, call.Context.IdempotencyKey, call.Approval = "op", "key", "grant"
	s.Set(call)
	var c guard.Call
	c.Context.CallID, c.Context.ResponseID = "framework-call", "framework-response"
	s.Apply(&c)
	if c.Context.OperationID != "op" || c.Context.IdempotencyKey != "key" || c.Approval != "grant" ||
		c.Context.CallID != "framework-call" || c.Context.ResponseID != "framework-response" {
		t.Errorf("Apply set %+v", c)
	}
}
