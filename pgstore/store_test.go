package pgstore_test

import (
	"context"
	"testing"

	"github.com/toolguard/toolguard/guard/guardtest"
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
	guardtest.TestStore(t, func(t *testing.T) guardtest.Store {
		n++
		s, err := pgstore.New(context.Background(), pool, pgstore.Options{Schema: "conformance_" + string(rune('a'+n/26)) + string(rune('a'+n%26))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
