// Package casestest runs the repository's tool-call case files as
// subtests, for the tests of every store that must pass them
// (guard.MemStore, idem on miniredis, pgstore): each such test keeps only
// how it makes a world.
package casestest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolguard/toolguard/internal/cases"
)

// Files are the case files every store passes: the user's suite, copied
// unchanged from the contract, the project's own cases written from the
// contract's rules, and the cases section 1 allows (empty tool name, empty
// and null ids).
var Files = []string{"tool-cases-v2.json", "cases-extra.json", "cases-section8.json"}

// Run runs every case of Files, read from the directory testdata, each as
// the subtest file/id in the world that world returns for it (world may
// call t.Parallel). A case fails when it could not run, ran fewer steps
// than it has, or a step's model result is not what the case wants.
func Run(t *testing.T, testdata string, world func(t *testing.T) cases.World) {
	t.Helper()
	for _, name := range Files {
		f, err := cases.Load(filepath.Join(testdata, name))
		if err != nil {
			t.Fatalf("loading %s: %v", name, err)
		}
		for i := range f.Cases {
			c := &f.Cases[i]
			t.Run(name+"/"+c.ID, func(t *testing.T) {
				rep := cases.Run(context.Background(), c, world(t))
				if rep.Err != nil {
					t.Fatalf("case could not run: %v", rep.Err)
				}
				if len(rep.Steps) != len(c.Steps) {
					t.Errorf("ran %d of %d steps", len(rep.Steps), len(c.Steps))
				}
				for _, s := range rep.Steps {
					for _, m := range s.Mismatch {
						t.Errorf("step %s: %s\n  model result: %s", s.StepID, m, s.Result)
					}
				}
			})
		}
	}
}
