package idem

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/audit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestRecordsOfAnEarlierVersion: records and bindings an earlier version
// kept as hashes answer as they did (replays of the write and the read, a
// status query, an operator's listing), and the store goes on writing.
func TestRecordsOfAnEarlierVersion(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s, err := New(rdb, Options{Prefix: redistest.Prefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, s)
		alice := guardtest.Principal("tenant-a", "alice")
		put := `{"key":"a","value":"1"}`
		first := w.Dispatch(t, alice, "put", put, "c1", "idem-1")
		guardtest.Want(t, first, guard.CodeOK, guard.DeliveryFresh)
		read := w.Dispatch(t, alice, "get", `{"key":"a"}`, "c2", "")
		guardtest.Want(t, read, guard.CodeOK, guard.DeliveryFresh)

		k1 := makeKeys(s.prefix, "tenant-a", "alice", "c1", "k:idem-1", "c1")
		k2 := makeKeys(s.prefix, "tenant-a", "alice", "c2", "", "c2")
		for _, kn := range []struct {
			key   string
			names []string
		}{{k1.call, bindingNames}, {k1.idem, recordNames}, {k2.call, bindingNames}} {
			v, err := rdb.Get(ctx, kn.key).Result()
			if err != nil {
				t.Fatalf("%s: %v", kn.key, err)
			}
			var args []any
			// As an earlier version kept them: the fingerprint in hex, a
			// binding's link the record's whole key.
			for i, f := range decodeFields(v) {
				switch {
				case f == "":
					continue
				case kn.names[i] == "fp":
					f = shownFP(f)
				case kn.names[i] == "key" && kn.key == k1.call:
					f = s.tag("tenant-a") + f
				}
				args = append(args, kn.names[i], f)
			}
			if len(args) == 0 {
				t.Fatalf("%s holds no fields: %q", kn.key, v)
			}
			rdb.Del(ctx, kn.key)
			if err := rdb.HSet(ctx, kn.key, args...).Err(); err != nil {
				t.Fatal(err)
			}
		}

		again := w.Dispatch(t, alice, "put", put, "c3", "idem-1")
		guardtest.Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(again.Data) != string(first.Data) {
			t.Fatalf("replay of the write: %s, want %s", again.Data, first.Data)
		}
		guardtest.Want(t, w.Dispatch(t, alice, "put", put, "c1", "idem-1"), guard.CodeOK, guard.DeliveryLocalReplay)
		guardtest.Want(t, w.Dispatch(t, alice, "get", `{"key":"a"}`, "c2", ""), guard.CodeOK, guard.DeliveryLocalReplay)
		guardtest.Want(t, w.Dispatch(t, alice, "put", put, "c1", "idem-other"), guard.CodeOK, guard.DeliveryLocalReplay)
		if st := w.Status(t, alice, "c1"); st.Code != guard.CodeOK || string(st.Data) != string(first.Data) {
			t.Fatalf("status of c1: %v %s", st.Code, st.Data)
		}
		guardtest.Want(t, w.Dispatch(t, alice, "put", `{"key":"b","value":"2"}`, "c4", "idem-1"),
			guard.CodeIdempotencyConflict, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, "put", `{"key":"b","value":"2"}`, "c5", "idem-2"), guard.CodeOK, guard.DeliveryFresh)
		if got, err := s.Unsettled(ctx, "tenant-a", w.Now()); err != nil || len(got) != 0 {
			t.Fatalf("unsettled: %v, %v", got, err)
		}
		if _, err := audit.Verify(ctx, s, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	})
}
