package idem_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestFailoverToStalledReplica: a master and one replica whose link to the
// master goes through a proxy. Writes run while the replica is healthy,
// then while it is stalled (the proxy paused) — some reserved before the
// stall and committed after it, some started during it. The master is
// SIGKILLed and the replica promoted (REPLICAOF NO ONE), and every write is
// retried with the same call id and key on the new master.
//
// With Options.Replicas = 1, no acknowledged write runs again: a
// reservation is only let run once a replica has it, so the promoted
// replica holds every acknowledged write's reservation (and settles those
// whose commit it missed from the receipt); writes started during the
// stall were answered UNAVAILABLE, never ran, and run once when retried.
// Without the option, the writes acknowledged during the stall are gone
// with the master, and their retries run them again.
func TestFailoverToStalledReplica(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas=%d", replicas), func(t *testing.T) {
			master := redistest.StartServer(t, t.TempDir(), portMaster, "--appendonly", "no", "--repl-diskless-sync-delay", "0")
			masterAddr, replicaAddr := fmt.Sprintf("127.0.0.1:%d", portMaster), fmt.Sprintf("127.0.0.1:%d", portReplica)
			link := redistest.NewProxy(t, masterAddr)
			host, port, _ := net.SplitHostPort(link.Addr())
			redistest.StartServer(t, t.TempDir(), portReplica, "--appendonly", "no", "--replicaof", host, port)

			mc := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: masterAddr})
			rc := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: replicaAddr, MaxRetries: 10})
			t.Cleanup(func() { _ = mc.Close(); _ = rc.Close() })
			if !redistest.WaitUntil(10*time.Second, func() bool {
				return infoHas(rc, "master_link_status:up") && infoHas(mc, "connected_slaves:1")
			}) {
				t.Fatal("the replica never linked to the master")
			}
			waitCaughtUp(t, mc, rc)
			prefix := redistest.Prefix(t)
			s, err := idem.New(mc, idem.Options{Prefix: prefix, Replicas: replicas}) // ReplicaTimeout: the default 1 s
			if err != nil {
				t.Fatal(err)
			}
			r := newRig(t, s)
			runAll := func(list []op) []*guard.Result { return r.dispatchAll(t, list, 5*time.Second) }

			healthy, mid, stalled := ops(alice, "healthy", 8), ops(alice, "mid", 4), ops(alice, "stalled", 6)
			acked := append([]op(nil), healthy...)
			for i, res := range runAll(healthy) {
				if res.Code != guard.CodeOK {
					t.Fatalf("%s with a healthy replica: %s", healthy[i].callID, res)
				}
			}
			// Reserved with the replica healthy; the side effect happens;
			// the replica stalls; then the commit.
			entered, release := r.led.block(len(mid))
			midResults := make(chan []*guard.Result, 1)
			go func() { midResults <- runAll(mid) }()
			for range mid {
				select {
				case <-entered:
				case <-time.After(10 * time.Second):
					release()
					t.Fatal("the mid writes never ran")
				}
			}
			waitCaughtUp(t, mc, rc) // the mid writes' reservations are on the replica
			link.Pause()
			release()
			for i, res := range <-midResults {
				if res.Code != guard.CodeOK {
					t.Fatalf("%s committed with the replica stalled: %s, want OK (the write ran)", mid[i].callID, res)
				}
			}
			acked = append(acked, mid...)
			stalledRes := runAll(stalled)
			for i, res := range stalledRes {
				switch {
				case replicas > 0 && res.Code != guard.CodeUnavailable:
					t.Errorf("%s with the replica stalled and Replicas=1: %s, want UNAVAILABLE", stalled[i].callID, res)
				case replicas == 0 && res.Code != guard.CodeOK:
					t.Errorf("%s with the replica stalled and no Replicas: %s, want OK", stalled[i].callID, res)
				}
			}
			if replicas > 0 {
				if never, _, _ := r.led.tally(t, stalled); never != len(stalled) {
					t.Fatalf("%d writes ran without a replica's acknowledgement", len(stalled)-never)
				}
			} else {
				acked = append(acked, stalled...)
			}
			masterHead := headSeq(t, mc, s)

			// Failover: the master dies, the stalled replica is promoted.
			_ = master.Process.Kill()
			_ = master.Wait()
			link.Cut() // what the replica had not received is gone
			if err := rc.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
				t.Fatal(err)
			}
			promoted, err := idem.New(rc, idem.Options{Prefix: prefix}) // no replica yet
			if err != nil {
				t.Fatal(err)
			}
			promotedHead := headSeq(t, rc, promoted)
			r.use(promoted)

			paths := map[string]int{}
			for _, o := range append(append([]op(nil), healthy...), append(mid, stalled...)...) {
				res, path := r.recover(t, o)
				if res.Code != guard.CodeOK {
					t.Fatalf("%s after the failover: %s (%s)", o.callID, res, path)
				}
				paths[strings.SplitN(o.callID, "-", 2)[0]+": "+path]++
			}
			never, once, again := r.led.tally(t, acked)
			if never != 0 {
				t.Fatalf("%d acknowledged writes never ran", never)
			}
			_, stalledOnce, _ := r.led.tally(t, stalled)
			switch {
			case replicas > 0 && again != 0:
				t.Errorf("Replicas=1: %d acknowledged writes ran again after the failover, want 0", again)
			case replicas > 0 && stalledOnce != len(stalled):
				t.Errorf("Replicas=1: %d of %d writes refused during the stall ran once after it", stalledOnce, len(stalled))
			case replicas == 0 && again != len(stalled):
				t.Errorf("no Replicas: %d acknowledged writes ran again, want the %d acknowledged during the stall",
					again, len(stalled))
			}
			verifyAll(t, promoted, alice.TenantID)
			t.Logf("Replicas=%d: %d acknowledged writes: %d ran once, %d ran again after the failover; "+
				"audit head %s on the master, %s on the promoted replica; recovery: %v",
				replicas, len(acked), once, again, masterHead, promotedHead, paths)
		})
	}
}

// waitCaughtUp waits until the replica has everything the master sent.
func waitCaughtUp(t *testing.T, master, replica *redis.Client) {
	t.Helper()
	offset := func(c *redis.Client, field string) string {
		info, _ := c.Info(context.Background(), "replication").Result()
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				return v
			}
		}
		return "?"
	}
	if !redistest.WaitUntil(10*time.Second, func() bool {
		return offset(master, "master_repl_offset") == offset(replica, "slave_repl_offset")
	}) {
		t.Fatal("the replica never caught up with the master")
	}
}

// infoHas reports whether the server's INFO replication has the line.
func infoHas(c *redis.Client, line string) bool {
	info, err := c.Info(context.Background(), "replication").Result()
	return err == nil && strings.Contains(info, line)
}

// headSeq returns the sequence number of the audit head of alice's tenant.
func headSeq(t *testing.T, c *redis.Client, s *idem.Store) string {
	t.Helper()
	_, head := s.AuditKeys(alice.TenantID)
	h, err := c.Get(context.Background(), head).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	seq, _, _ := strings.Cut(h, " ")
	return seq
}
