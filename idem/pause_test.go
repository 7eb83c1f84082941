package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// Ports of the servers the fault tests start (19000–19099 are theirs).
const (
	portPause     = 19000
	portEviction  = 19010
	portMaster    = 19020
	portReplica   = 19021
	portCluster   = 19030 // to 19035
	portNoPersist = 19050
	portPolicy    = 19060
)

// pauseWriters is how many writes are reserving when Redis stops answering.
const pauseWriters = 12

// shortClient is a client with short timeouts whose pool holds enough
// ready connections for every writer, so that requests are sent while
// Redis does not answer (a new connection would stop at its handshake
// instead): as many blocking calls as connections run at once first.
func shortClient(t *testing.T, addr string, maxRetries int) *redis.Client {
	t.Helper()
	const conns = 2 * pauseWriters
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addr, MaxRetries: maxRetries,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		PoolSize: conns})
	t.Cleanup(func() { _ = rdb.Close() })
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() { _ = rdb.Do(context.Background(), "BLPOP", "tgtest:none", "0.05").Err() })
	}
	wg.Wait()
	if st := rdb.PoolStats(); st.IdleConns < conns {
		t.Fatalf("pool: %+v, want %d ready connections", st, conns)
	}
	return rdb
}

// TestPausedServerLosesReservationReplies: Redis stops answering (a paused
// network path, or the server itself busy in DEBUG SLEEP) while writes are
// reserving, so their reservation replies are lost and, where the requests
// are delivered late, the reservations land after the callers gave up. Every
// caller is answered UNAVAILABLE within its deadline and nothing runs; then
// each write, retried with the same call id and key and following the
// contract's recovery, runs exactly once; no key stays stuck; the audit
// chain verifies.
func TestPausedServerLosesReservationReplies(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portPause, "--appendonly", "no", "--enable-debug-command", "yes")
	addr := fmt.Sprintf("127.0.0.1:%d", portPause)
	direct := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })

	for _, fault := range []string{"proxy-pause", "debug-sleep"} {
		for _, retries := range []struct {
			name string
			n    int
		}{{"MaxRetries=-1", -1}, {"MaxRetries=default", 0}} {
			t.Run(fault+"/"+retries.name, func(t *testing.T) {
				px := redistest.NewProxy(t, addr)
				target := addr
				if fault == "proxy-pause" {
					target = px.Addr()
				}
				r := newRig(t, newStore(t, shortClient(t, target, retries.n)))
				warm := op{p: alice, callID: "warm", key: "warm"}
				guardtest.Want(t, r.dispatch(t, context.Background(), warm), guard.CodeOK, guard.DeliveryFresh)

				var wake func()
				if fault == "proxy-pause" {
					px.Pause()
					wake = px.Resume
				} else {
					wake = sleepServer(t, direct, 2*time.Second)
				}
				list := ops(alice, "w", pauseWriters)
				results := r.dispatchAll(t, list, 600*time.Millisecond)
				wake()
				for i, res := range results {
					if res.Code != guard.CodeUnavailable {
						t.Errorf("%s while Redis did not answer: %s, want UNAVAILABLE", list[i].callID, res)
					}
				}
				if never, _, _ := r.led.tally(t, list); never != len(list) {
					t.Fatalf("%d of %d writes ran while Redis did not answer", len(list)-never, len(list))
				}

				paths, stuckReleased := map[string]int{}, 0
				released := releasedCalls(t, r.Store, alice.TenantID)
				for _, o := range list {
					res, path := r.recover(t, o)
					if path != "OK" && released[o.callID] {
						stuckReleased++ // released, then its late reservation took the key
					}
					guardtest.Want(t, res, guard.CodeOK, guard.DeliveryFresh)
					paths[path]++
					again := r.dispatch(t, context.Background(), o)
					if again.Code != guard.CodeOK || again.Delivery != guard.DeliveryLocalReplay || string(again.Data) != string(res.Data) {
						t.Errorf("%s replayed as %s, want the result %s", o.callID, again, res.Data)
					}
				}
				if never, once, again := r.led.tally(t, list); once != len(list) {
					t.Errorf("after recovery: %d writes never ran, %d once, %d more than once; want all once", never, once, again)
				}
				verifyAll(t, r.Store, alice.TenantID)
				t.Logf("%d writes, each UNAVAILABLE (%d releases stored), then recovered by: %v; %d stuck although their release was stored "+
					"(TestReleaseBeforeLateReservation)", len(list), len(released), paths, stuckReleased)
			})
		}
	}
}

// releasedCalls returns the call ids whose release (an audited
// UNAVAILABLE) reached the store.
func releasedCalls(t *testing.T, s guard.AuditStore, tenant string) map[string]bool {
	t.Helper()
	recs, _, err := s.Audit(context.Background(), tenant, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, rec := range recs {
		var b guard.AuditBody
		if rec.Code == guard.CodeUnavailable && json.Unmarshal(rec.Body, &b) == nil {
			out[b.Context.CallID] = true
		}
	}
	return out
}

// sleepServer makes the server sleep for d (DEBUG SLEEP) and returns once
// it no longer answers; the returned function waits until it answers again.
func sleepServer(t *testing.T, direct *redis.Client, d time.Duration) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		defer cancel()
		done <- direct.Do(ctx, "DEBUG", "SLEEP", fmt.Sprintf("%.1f", d.Seconds())).Err()
	}()
	probe := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: direct.Options().Addr,
		ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	if !redistest.WaitUntil(d, func() bool { return probe.Ping(context.Background()).Err() != nil }) {
		t.Fatal("the server kept answering during DEBUG SLEEP")
	}
	return func() {
		if err := <-done; err != nil {
			t.Fatalf("DEBUG SLEEP: %v", err)
		}
	}
}

// TestReleaseBeforeLateReservation: the guard releases a reservation whose
// reply it did not get (a commit of UNAVAILABLE under its token), and the
// reservation request itself arrives after the release: it was sent on
// another connection, delayed by the network or by a busy server. The
// Store contract says a late copy of a released reservation is refused
// ("after the reservation was released … a late copy cannot reserve the
// key again"). The release found no record to turn into a tombstone, so
// the late copy reserves the key: the key is held by a reservation nobody
// will commit, IN_PROGRESS for a whole lease, and then OUTCOME_UNKNOWN
// until a status query settles it, although the caller was told
// "nothing was executed". Safe (nothing runs twice), but the key is stuck.
func TestReleaseBeforeLateReservation(t *testing.T) {
	_, rdb := redistest.Mini(t)
	s := newStore(t, rdb)
	now := time.Unix(1_700_000_000, 0)
	e := &guard.Entry{TenantID: "tenant-a", SubjectID: "alice", CallID: "c1", OperationID: "c1", IdempotencyKey: "k:key-1",
		Tool: "put", Fingerprint: "fp-1", Effect: guard.Write, Now: now, SideEffect: guard.SideEffectNone,
		AuditBody: []byte(`{}`), Token: "token-1"}
	ctx := context.Background()

	release := *e
	release.Code, release.Message = guard.CodeUnavailable, "released"
	if _, err := s.Commit(ctx, &release); err != nil {
		t.Fatal(err)
	}
	late, err := s.Reserve(ctx, e, guardtest.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if late == nil {
		retry := *e
		retry.Token, retry.Now = "token-2", now.Add(time.Second)
		held, _ := s.Reserve(ctx, &retry, guardtest.Lease)
		t.Fatalf("a reservation arriving after its token's release took the key (want it refused, as a late copy "+
			"after a release is); the caller's retry then gets %v instead of running", held)
	}
	if late.Code != guard.CodeUnavailable {
		t.Fatalf("late reservation: %s, want UNAVAILABLE (refused)", late)
	}
}
