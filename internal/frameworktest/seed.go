// Package frameworktest is what the tests of the framework integrations
// (integrations/adk, eino, genkit, dbos, temporal: nested modules whose
// import paths lie under this module's, so they may import it) share, so
// that each module's tests keep only the code that speaks its framework:
//
//   - SeedSuite runs the user's seed cases (testdata/tool-cases-v2.json)
//     through a framework's tool-execution path, given as a cases.Connect;
//     StatusArguments, WithStep and StepCall (or Step), and SeedOptions are
//     the pieces such a Connect is built from.
//   - NewOrders is the conformance order service's tools behind a guard,
//     and WantApprovedWrite, WantDeclared and CanonicalJSON the checks the
//     agent tests make against it.
//   - FailingHooks are the host functions that fail or panic, for a
//     framework whose host functions see a context.Context.
//   - NotesServer is an MCP server with a write and a read, for the tests
//     of imported MCP tools.
//
// The approvals inbox's fixture, which needs a Redis, is in the
// subpackage inboxtest.
package frameworktest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/cases"
)

// SeedCases is how many cases the seed suite holds; every one must pass.
const SeedCases = 18

// stdout is where SeedSuite prints its tally.
var stdout io.Writer = os.Stdout

// SeedFile returns the path of the seed suite's case file,
// testdata/tool-cases-v2.json at the root of this module, wherever the
// test that asks runs (a nested module replaces this one with its source
// directory, so the file is on disk).
func SeedFile() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.FromSlash("../../testdata/tool-cases-v2.json") // from integrations/<module>
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "tool-cases-v2.json")
}

// SeedSuite runs every case of the seed suite (SeedFile) with each step
// carried through the host that connect connects (cases.RunThrough), each
// case in a fresh world on guard.MemStore. It reports a case that could not run
// and every step's mismatch with t.Errorf, prints the tally to stdout as
//
//	seed suite: N passed, M failed
//
// and fails the test unless the file holds SeedCases cases and all of
// them pass. It returns the tally.
//
// A framework's TestSeedSuite is then one line:
//
//	func TestSeedSuite(t *testing.T) { frameworktest.SeedSuite(t, myCarrier) }
func SeedSuite(t testing.TB, connect cases.Connect) (passed, failed int) {
	t.Helper()
	f, err := cases.Load(SeedFile())
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		w := cases.World{Store: guard.NewMemStore(guard.MemStoreOptions{}), Close: func() {}}
		rep := cases.RunThrough(t.Context(), c, w, connect)
		w.Close()
		if rep.Passed() {
			passed++
			continue
		}
		failed++
		t.Errorf("case %s: %v", c.ID, rep.Err)
		if rep.NotCarried != "" {
			t.Errorf("  %s: not carried: %s", c.ID, rep.NotCarried)
		}
		for _, s := range rep.Steps {
			for _, m := range s.Mismatch {
				t.Errorf("  %s/%s: %s (result %s)", c.ID, s.StepID, m, s.Result)
			}
		}
	}
	fmt.Fprintf(stdout, "seed suite: %d passed, %d failed\n", passed, failed)
	if len(f.Cases) != SeedCases {
		t.Errorf("the seed suite has %d cases, want %d", len(f.Cases), SeedCases)
	}
	if passed != SeedCases || failed != 0 {
		t.Errorf("seed suite: %d passed, %d failed, want %d and 0", passed, failed, SeedCases)
	}
	return passed, failed
}

// StatusArguments are the arguments a model gives the status tool for the
// status query sc: the operation id, and the tool's name or null.
func StatusArguments(sc *guard.StatusCall) map[string]any {
	args := map[string]any{"operation_id": sc.OperationID, "tool": nil}
	if sc.Tool != "" {
		args["tool"] = sc.Tool
	}
	return args
}

type stepKey struct{}

// WithStep returns ctx carrying a seed step's guard call, for StepCall to
// read back in the host hook.
func WithStep(ctx context.Context, call guard.Call) context.Context {
	return context.WithValue(ctx, stepKey{}, call)
}

// StepCall is a host hook (the Options.Call of an integration whose hooks
// see a context.Context) for the seed suite: it sets on the guard call the
// case's own ids and grant, which a framework does not carry, from the
// step WithStep put on ctx: the response id, the operation id, the
// idempotency key and the approval. The call id is the framework's, which
// the carrier gives the step's. Without a step on ctx it does nothing.
func StepCall(ctx context.Context, c *guard.Call) {
	s, ok := ctx.Value(stepKey{}).(guard.Call)
	if !ok {
		return
	}
	c.Context.ResponseID = s.Context.ResponseID
	c.Context.OperationID = s.Context.OperationID
	c.Context.IdempotencyKey = s.Context.IdempotencyKey
	c.Approval = s.Approval
}

// SeedOptions are the host options of a seed step for an integration
// whose Options are host.Options (Eino's, Genkit's): the case's principal,
// and StepCall.
func SeedOptions(p guard.Principal) host.Options {
	return host.Options{
		Principal: func(context.Context) (guard.Principal, error) { return p, nil },
		Call:      StepCall,
	}
}

// Step is the seed step in flight, for a carrier whose host hook cannot
// read it from its context (ADK's hooks see an agent.Context that is not
// the carrier's; a durable engine's activity runs apart): the carrier
// Sets each step before carrying it, and the hook Applies it.
type Step struct {
	mu   sync.Mutex
	call guard.Call
}

// Set makes call the step in flight.
func (s *Step) Set(call guard.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call = call
}

// Apply sets on c the case's ids and grant of the step in flight, which a
// framework does not carry: the operation id, the idempotency key and the
// approval. The rest of c is the integration's.
func (s *Step) Apply(c *guard.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Context.OperationID = s.call.Context.OperationID
	c.Context.IdempotencyKey = s.call.Context.IdempotencyKey
	c.Approval = s.call.Approval
}
