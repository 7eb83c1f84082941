package idem_test

import (
	"context"
	"testing"
	"time"

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
// real server and cluster when their addresses are set, once as the store
// comes (Redis Functions where the server has them; scripts on miniredis)
// and once with Options.Scripts (EVALSHA everywhere).
func TestConformance(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, mode := range []struct {
			name    string
			scripts bool
		}{{"default", false}, {"scripts", true}} {
			t.Run(mode.name, func(t *testing.T) {
				guardtest.TestStore(t, func(t *testing.T) guard.AuditStore {
					s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Scripts: mode.scripts})
					if err != nil {
						t.Fatal(err)
					}
					return s
				})
			})
		}
	})
}

// TestAuditTTL: with AuditTTL set, an idle tenant's whole log expires
// together; by default it is kept.
func TestAuditTTL(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	for _, tc := range []struct {
		ttl  time.Duration
		kept bool
	}{{0, true}, {time.Hour, false}} {
		s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), AuditTTL: tc.ttl})
		if err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, s)
		w.Dispatch(t, guardtest.Principal("tenant-a", "u"), guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c1"})
		stream, head := s.AuditKeys("tenant-a")
		if tc.ttl > 0 && (mr.TTL(stream) != tc.ttl || mr.TTL(head) != tc.ttl) {
			t.Fatalf("audit ttl %v: stream %v head %v", tc.ttl, mr.TTL(stream), mr.TTL(head))
		}
		mr.FastForward(2 * time.Hour)
		n, err := guard.VerifyAudit(context.Background(), s, "tenant-a")
		if tc.kept && (err != nil || n != 1) || !tc.kept && (err != nil || n != 0) {
			t.Fatalf("audit ttl %v after 2h: %d records, %v", tc.ttl, n, err)
		}
		mr.FlushAll()
	}
}
