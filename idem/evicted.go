package idem

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrEvicted is the refusal of every call once the server evicted a key:
// an evicted record or binding would make an acknowledged write run again
// on replay, and an evicted audit record leaves a gap in its tenant's
// chain. It wraps ErrEvictionPolicy (and so guard.ErrStoreRefused: the
// guard answers UNAVAILABLE, nothing runs). The store accepts the server
// again once a Check passes, its policy noeviction again.
var ErrEvicted = fmt.Errorf("%w: the server evicted a key", ErrEvictionPolicy)

// A store that refuses eviction (no Options.AllowEviction) keeps two
// watches on a server that reports its policy:
//
//   - The fence, in the script: every reservation (a write about to run,
//     and a write's replay) reads the server's maxmemory-policy (INFO
//     memory) before it reads or writes a key, and is refused with the
//     policy if it may evict ({'E', policy}: ErrEvictionPolicy, reason
//     "eviction_policy"). Redis runs a script alone, so an operator's
//     CONFIG SET that came first is seen by it: from the switch on, no
//     write runs and no replay is answered, before Redis evicts anything.
//     What the store acknowledges after the switch is only the writes
//     whose reservation ran before it, at most the dispatches in flight.
//     It costs the script one INFO (about 7 µs of the server's time per
//     reservation; docs/reliability.md), and no round trip.
//   - The events: each master publishes its evicted-key events (keyspace
//     notifications of class "e", on the keyevent channel:
//     notify-keyspace-events gains "Ee", keeping what it had; set again at
//     each check) and the store listens to them on one connection of its
//     own per master. The first event refuses every call, as a policy
//     found at a check does, with a log line and a count
//     (MetricStoreRefusals, reason "evicted"), even when the fence already
//     refused: an eviction lost records. It catches what the fence cannot
//     see: a policy switched and switched back between two reservations of
//     a master. A server whose configuration the store may not change (an
//     ACL without CONFIG) is said once in the log.
//
// What Redis evicts was written before: nothing brings it back. Replays of
// it are refused until a check passes, and toolctl gaps names the tenants
// whose audit chains lost records (docs/reliability.md).

// watchers are the store's subscriptions to its masters' evicted-key
// events, by master address.
type watchers struct {
	mu     sync.Mutex
	subs   map[string]*redis.PubSub
	warned map[string]bool
	closed bool
}

// evictedChannel is the keyevent channel of evictions in database db.
func evictedChannel(db int) string { return "__keyevent@" + strconv.Itoa(db) + "__:evicted" }

// evictionEvents reports whether notify-keyspace-events flags publish
// evicted-key events on the keyevent channel: E, and e or A (all classes).
func evictionEvents(flags string) bool {
	return strings.ContainsRune(flags, 'E') && strings.ContainsAny(flags, "eA")
}

// watch makes sure that c, a master the store just checked, publishes its
// evicted-key events and that the store listens to them. It asks the
// server for its notification flags each time (a check's round trip, not a
// dispatch's), so that flags an operator reset are set again.
func (s *Store) watch(ctx context.Context, c *redis.Client) {
	addr := c.Options().Addr
	cfg, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err == nil {
		if flags := cfg["notify-keyspace-events"]; !evictionEvents(flags) {
			err = c.ConfigSet(ctx, "notify-keyspace-events", flags+"Ee").Err()
		}
	}
	if err != nil {
		s.warnUnwatched(addr, err)
		return
	}
	w := &s.watchers
	w.mu.Lock()
	if w.closed || w.subs[addr] != nil {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	ps := c.Subscribe(ctx, evictedChannel(c.Options().DB))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		s.warnUnwatched(addr, err)
		return
	}
	w.mu.Lock()
	if w.closed || w.subs[addr] != nil {
		w.mu.Unlock()
		_ = ps.Close()
		return
	}
	if w.subs == nil {
		w.subs = map[string]*redis.PubSub{}
	}
	w.subs[addr] = ps
	w.mu.Unlock()
	go s.listen(addr, ps)
}

// warnUnwatched says once per server that its evictions are noticed only
// by the periodic check.
func (s *Store) warnUnwatched(addr string, err error) {
	w := &s.watchers
	w.mu.Lock()
	first := !w.warned[addr]
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[addr] = true
	w.mu.Unlock()
	if first {
		s.logger.Warn("idem: cannot listen to the Redis server's evicted-key events; an eviction is noticed at the next periodic check only",
			"server", addr, "error", err.Error())
	}
}

// listen refuses the store at the first evicted-key event of a master.
// go-redis reconnects and subscribes again after a dropped connection; the
// channel closes with Close or with the client.
func (s *Store) listen(addr string, ps *redis.PubSub) {
	for m := range ps.Channel(redis.WithChannelHealthCheckInterval(time.Minute)) {
		s.evicted(addr, m.Payload)
	}
}

// evicted refuses every call from now on, until a Check passes: the
// server at addr evicted key.
func (s *Store) evicted(addr, key string) {
	s.evictions.Add(1)
	s.refuse(fmt.Errorf("%w (%s evicted %s)", ErrEvicted, addr, key), reasonEvicted,
		"idem: the Redis server evicted a key; every call is refused (UNAVAILABLE) until its policy is noeviction again and a check passes",
		"server", addr, "key", key)
}

// Close stops the store's subscriptions to its servers' evicted-key
// events. The client is the caller's: Close leaves it open. A store is
// not used after Close.
func (s *Store) Close() error {
	w := &s.watchers
	w.mu.Lock()
	subs := w.subs
	w.subs, w.closed = nil, true
	w.mu.Unlock()
	for _, ps := range subs {
		_ = ps.Close()
	}
	return nil
}

// The refusal reasons of MetricStoreRefusals that evicted.go and
// server.go both give.
const (
	reasonEvicted        = "evicted"         // an evicted key
	reasonEvictionPolicy = "eviction_policy" // a policy that may evict
)

// fenceArg is the FENCE argument of a script: "1" while the store's
// scripts read the server's policy.
func (s *Store) fenceArg() string {
	if s.fence.Load() {
		return "1"
	}
	return ""
}

// fenced refuses every call from now on, until a Check passes: a
// reservation read the server's maxmemory-policy, policy, and it may
// evict. Nothing of that call ran or was answered from the store.
func (s *Store) fenced(policy string) error {
	err := fmt.Errorf("%w (a master has %s)", ErrEvictionPolicy, policy)
	s.refuse(err, reasonEvictionPolicy,
		"idem: the Redis server's maxmemory-policy allows eviction; every call is refused (UNAVAILABLE) until it is noeviction again and a check passes",
		"policy", policy)
	return err
}
