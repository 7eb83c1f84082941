package idem_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

func newStore(t *testing.T, rdb redis.UniversalClient) *idem.Store {
	t.Helper()
	return newStoreWithPrefix(t, rdb, redistest.Prefix(t))
}

func newStoreWithPrefix(t *testing.T, rdb redis.UniversalClient, prefix string) *idem.Store {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the store conformance suite on miniredis, and on a
// real server and cluster when their addresses are set.
func TestConformance(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		guardtest.TestStore(t, func(t *testing.T) guard.Store { return newStore(t, rdb) })
	})
}
