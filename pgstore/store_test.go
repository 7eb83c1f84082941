package pgstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/cases/casestest"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/pgstore"
)

// newStore returns a store on a database of the test's own.
func newStore(t testing.TB, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.NewDB(t), 8)
	s, err := pgstore.New(context.Background(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the store conformance suite on Postgres: every
// subtest in a schema of its own in one database.
func TestConformance(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t), 8)
	n := 0
	guardtest.TestStore(t, func(t *testing.T) guard.AuditStore {
		n++
		s, err := pgstore.New(context.Background(), pool, pgstore.Options{Schema: "conformance_" + string(rune('a'+n/26)) + string(rune('a'+n%26))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestCases runs the repository's tool-call case files (the seed suite
// and the project's own) on Postgres, each case in a schema of its own.
func TestCases(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t), 8)
	var n atomic.Int64
	casestest.Run(t, filepath.Join("..", "testdata"), func(t *testing.T) cases.World {
		schema := fmt.Sprintf("case_%d", n.Add(1))
		t.Parallel()
		s, err := pgstore.New(context.Background(), pool, pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return cases.World{Store: s, Close: func() {}}
	})
}
