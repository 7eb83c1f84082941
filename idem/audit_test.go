package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// writeLog fills a store with n dispatches of one tenant and returns it.
func writeLog(t *testing.T, rdb redis.UniversalClient, n int) (guard.AuditStore, string) {
	t.Helper()
	s := newStore(t, rdb)
	w := guardtest.NewWorld(t, s)
	p := guardtest.Principal("tenant-a", "alice")
	for i := range n {
		w.Dispatch(t, p, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c" + string(rune('a'+i))})
	}
	if got, err := guard.VerifyAudit(context.Background(), s, "tenant-a"); err != nil || got != int64(n) {
		t.Fatalf("fresh log: %d records, %v", got, err)
	}
	stream, _ := s.AuditKeys("tenant-a")
	return s, stream
}

func wantBroken(t *testing.T, s guard.AuditStore, seq int64) {
	t.Helper()
	_, err := guard.VerifyAudit(context.Background(), s, "tenant-a")
	var ce *guard.AuditChainError
	if !errors.As(err, &ce) || ce.Seq != seq {
		t.Fatalf("VerifyAudit = %v, want a chain error at record %d", err, seq)
	}
}

func TestAuditDetectsTampering(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		t.Run("EditedBody", func(t *testing.T) {
			s, key := writeLog(t, rdb, 4)
			redistest.RewriteStream(t, rdb, key, func(id string, v map[string]any) bool {
				if id == "2-1" {
					// The subject's name, in whatever form the store keeps the body.
					body := v["body"].(string)
					if !strings.Contains(body, "alice") {
						t.Fatalf("record 2's stored body %q does not name alice", body)
					}
					v["body"] = strings.Replace(body, "alice", "mallory", 1)
				}
				return true
			})
			wantBroken(t, s, 2)
		})
		t.Run("EditedCode", func(t *testing.T) {
			s, key := writeLog(t, rdb, 4)
			redistest.RewriteStream(t, rdb, key, func(id string, v map[string]any) bool {
				if id == "3-1" {
					v["code"] = "NOT_FOUND"
				}
				return true
			})
			wantBroken(t, s, 3)
		})
		t.Run("DroppedMiddle", func(t *testing.T) {
			s, key := writeLog(t, rdb, 4)
			redistest.RewriteStream(t, rdb, key, func(id string, _ map[string]any) bool { return id != "2-1" })
			wantBroken(t, s, 2)
		})
		t.Run("DroppedTail", func(t *testing.T) {
			s, key := writeLog(t, rdb, 4)
			redistest.RewriteStream(t, rdb, key, func(id string, _ map[string]any) bool { return id != "4-1" })
			wantBroken(t, s, 4)
		})
		t.Run("RehashedRecordBreaksTheNext", func(t *testing.T) {
			// Editing a record and fixing its own hash still breaks the
			// link of the record after it.
			s, key := writeLog(t, rdb, 4)
			recs, _, err := s.Audit(context.Background(), "tenant-a", 1, 1)
			if err != nil || len(recs) != 1 {
				t.Fatalf("record 2: %v, %v", recs, err)
			}
			edited := recs[0]
			edited.SideEffect = guard.SideEffectYes
			edited.Hash = edited.Link()
			redistest.RewriteStream(t, rdb, key, func(id string, v map[string]any) bool {
				if id == "2-1" {
					v["side"], v["hash"] = string(edited.SideEffect), edited.Hash
				}
				return true
			})
			wantBroken(t, s, 3)
		})
	})
}
