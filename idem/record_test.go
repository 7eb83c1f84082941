package idem

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// FuzzFields: fields packed read back as they were, and any stored bytes
// read without a panic.
func FuzzFields(f *testing.F) {
	f.Add("fp", "", strings.Repeat("d", 40), strings.Repeat("x", 300))
	f.Add("3:abc", "0:", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		want := []string{a, b, c, d}
		got := decodeFields(string(packFields(want...)))
		if len(got) != len(want) {
			t.Fatalf("read %d fields of %d: %q", len(got), len(want), got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("field %d: %q, want %q", i, got[i], want[i])
			}
		}
		decodeFields(a + b + c + d)
	})
}

func TestPackedFieldSizes(t *testing.T) {
	// Each header size, at both ends of its range.
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		f := strings.Repeat("v", n)
		p := packFields(f, "after")
		if got := decodeFields(string(p)); len(got) != 2 || got[0] != f || got[1] != "after" {
			t.Fatalf("length %d: read %d fields", n, len(got))
		}
	}
}

// TestOutputsOfEverySize: outputs whose packed length takes each header
// size (idem/lua/prelude.lua writes them with cmsgpack on Redis, with Lua
// on miniredis) are stored and replayed whole, from a write's record and a
// read's binding.
func TestOutputsOfEverySize(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := testStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		alice := guardtest.Principal("tenant-a", "alice")
		for i, n := range []int{0, 31, 200, 255, 300, 65535, 70000} {
			value := strings.Repeat("v", n)
			id := fmt.Sprint(i)
			put := fmt.Sprintf(`{"key":"k%s","value":"%s"}`, id, value)
			first := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: put, CallID: "w" + id, Key: "idem-" + id})
			guardtest.Want(t, first, guard.CodeOK, guard.DeliveryFresh)
			again := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: put, CallID: "w" + id + "-again", Key: "idem-" + id})
			guardtest.Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
			if string(again.Data) != string(first.Data) || !strings.Contains(string(first.Data), value) {
				t.Fatalf("value of %d bytes: replayed %d bytes of output, first %d", n, len(again.Data), len(first.Data))
			}
			read := w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"k` + id + `"}`, CallID: "r" + id})
			guardtest.Want(t, read, guard.CodeOK, guard.DeliveryFresh)
			reread := w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"k` + id + `"}`, CallID: "r" + id})
			guardtest.Want(t, reread, guard.CodeOK, guard.DeliveryLocalReplay)
			if string(reread.Data) != string(read.Data) || !strings.Contains(string(read.Data), value) {
				t.Fatalf("read of %d bytes: replayed %d bytes, first %d", n, len(reread.Data), len(read.Data))
			}
		}
	})
}

// TestWhatTheScriptsStoreAndAnswer: the values the scripts store without
// packing them (a read's binding: the start of its arguments; a
// reservation: the record the store packed) are, byte for byte, what they
// would have packed; and the answer to a fresh read or commit is SENT, not
// the output again, while the answer to a replay carries the output.
func TestWhatTheScriptsStoreAndAnswer(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := testStore(t, rdb)
		fp := strings.Repeat("ab", 32)
		now := time.UnixMilli(1_700_000_000_123)
		for _, out := range []string{"", `{"id":"o1"}`, strings.Repeat("x", 300), strings.Repeat("y", 70000)} {
			call := fmt.Sprintf("r%d", len(out))
			read := &guard.Entry{TenantID: "tenant-a", SubjectID: "alice", CallID: call, OperationID: call, Tool: "get",
				Fingerprint: fp, Effect: guard.Read, Now: now, Code: guard.CodeOK, Data: []byte(out),
				SideEffect: guard.SideEffectNone, AuditBody: []byte(`{"tool":"get"}`)}
			keys, a := s.args(read, call, releaseHold, guard.ReceiptInconclusive)
			reply, err := s.run(ctx, finishScript, keys, a.argv())
			if err != nil || len(reply) != 1 || reply[0] != "S" {
				t.Fatalf("fresh read of %d bytes: reply %.40q, %v; want SENT", len(out), reply, err)
			}
			res, err := parseResult(reply, a)
			if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh || string(res.Data) != out {
				t.Fatalf("fresh read of %d bytes: %+v, %v", len(out), res, err)
			}
			k := makeKeys(s.prefix, "tenant-a", "alice", call, "", call)
			if got, want := mustGet(t, rdb, k.call), string(packFields(storedFP(fp), "OK", out, "")); got != want {
				t.Fatalf("binding of a read of %d bytes: %.60q; want %.60q", len(out), got, want)
			}
			// A retry of the call: a replay, whose answer carries the output.
			reply, err = s.run(ctx, finishScript, keys, a.argv())
			if err != nil || len(reply) != 7 || reply[0] != "R" || reply[2] != string(guard.DeliveryLocalReplay) || reply[3] != out {
				t.Fatalf("replayed read of %d bytes: reply %.60q, %v", len(out), reply, err)
			}
		}

		write := &guard.Entry{TenantID: "tenant-a", SubjectID: "alice", CallID: "w1", OperationID: "op-1",
			IdempotencyKey: "k:idem-1", Tool: "put", Fingerprint: fp, Effect: guard.Write, Now: now,
			SideEffect: guard.SideEffectYes, AuditBody: []byte(`{"tool":"put"}`), Token: strings.Repeat("0f", 16)}
		if res, err := s.Reserve(ctx, write, 30*time.Second); res != nil || err != nil {
			t.Fatalf("reserve: %+v, %v", res, err)
		}
		k := makeKeys(s.prefix, "tenant-a", "alice", "w1", "k:idem-1", "op-1")
		got := mustGet(t, rdb, k.idem)
		want := string(packFields(storedFP(fp), "P", "", "", "op-1", "1700000030123", storedToken(write.Token), "put", "k:idem-1", "w1"))
		if got != want {
			t.Fatalf("reservation: %q; want %q", got, want)
		}
		write.Code, write.Data = guard.CodeOK, []byte(`{"done":true}`)
		keys, a := s.args(write, write.CallID, releaseHold, guard.ReceiptInconclusive)
		reply, err := s.run(ctx, commitScript, keys, a.argv())
		if err != nil || len(reply) != 1 || reply[0] != "S" {
			t.Fatalf("fresh commit: reply %q, %v; want SENT", reply, err)
		}
		rec := decodeFields(mustGet(t, rdb, k.idem))
		if len(rec) != 11 || rec[1] != "C" || rec[2] != `{"done":true}` || rec[5] != "1700000030123" || rec[10] != "=" {
			t.Fatalf("committed record %q", rec)
		}
	})
}

func mustGet(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

// TestClockBefore1970: the guard's clock is the store's clock, whatever it
// says (a test's fake clock may say year 1). A reservation's lease ends
// where the store packed it, and a second reservation of the key meanwhile
// is told the first is in progress, for as long as the lease runs.
func TestClockBefore1970(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := testStore(t, rdb)
		for i, now := range []time.Time{{}, time.UnixMilli(-1), time.UnixMilli(1_700_000_000_000)} {
			key := fmt.Sprintf("k:idem-%d", i)
			e := &guard.Entry{TenantID: "tenant-a", SubjectID: "alice", CallID: fmt.Sprintf("c%d", i), OperationID: fmt.Sprintf("c%d", i),
				IdempotencyKey: key, Tool: "put", Fingerprint: strings.Repeat("cd", 32), Effect: guard.Write, Now: now,
				SideEffect: guard.SideEffectYes, AuditBody: []byte(`{"tool":"put"}`), Token: strings.Repeat("1e", 16)}
			if res, err := s.Reserve(ctx, e, 30*time.Second); res != nil || err != nil {
				t.Fatalf("now %v: reserve: %+v, %v", now, res, err)
			}
			rec := decodeFields(mustGet(t, rdb, makeKeys(s.prefix, "tenant-a", "alice", e.CallID, key, e.OperationID).idem))
			if want := fmt.Sprint(now.UnixMilli() + 30_000); len(rec) < 6 || rec[5] != want {
				t.Fatalf("now %v: reservation %q, want its lease to end at %s", now, rec, want)
			}
			again := *e
			again.CallID, again.OperationID, again.Token = e.CallID+"-again", e.CallID+"-again", strings.Repeat("2f", 16)
			again.Now = now.Add(29 * time.Second)
			res, err := s.Reserve(ctx, &again, 30*time.Second)
			if err != nil || res == nil || res.Code != guard.CodeInProgress || res.RetryAfter != time.Second {
				t.Fatalf("now %v: a second reservation 29 s later: %+v, %v; want IN_PROGRESS, retry after 1s", now, res, err)
			}
		}
	})
}

// testStore is a store on rdb under the test's own prefix.
func testStore(t *testing.T, rdb redis.UniversalClient) *Store {
	t.Helper()
	s, err := New(rdb, Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
