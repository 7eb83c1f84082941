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
// guard answers UNAVAILABLE, nothing runs). The refusal outlives the
// policy: the store accepts the server again only once an operator has
// acknowledged what was lost (AckEvictions, toolctl ack) and a Check
// passes, its policy noeviction again.
var ErrEvicted = fmt.Errorf("%w: the server evicted keys, and no operator has acknowledged what was lost (toolctl evictions)", ErrEvictionPolicy)

// A store that refuses eviction (no Options.AllowEviction) keeps three
// watches on a server that reports its policy:
//
//   - The fence, in the scripts: every script (a reservation, a commit, a
//     read's finish, a status query, a charge) reads the server's
//     maxmemory-policy (INFO memory) before it reads or writes a key, and
//     is refused with the policy if it may evict ({'F', policy}:
//     ErrEvictionPolicy, reason "eviction_policy"). Redis runs a script
//     alone, so an operator's CONFIG SET that came first is seen by it:
//     from the switch on, no write runs, no replay is answered and no
//     outcome is acknowledged, before Redis evicts anything. What the
//     store committed before the switch is all Redis can take (a commit
//     the server ran before it may still answer its caller after Redis
//     began to evict: a true answer, whose records can go). It costs
//     each script one INFO (about 7 µs of the server's time;
//     docs/reliability.md), and no round trip. The fence alone refuses
//     only while the policy may evict: a policy switched and back with
//     nothing evicted costs nothing more.
//   - The events: each master publishes its evicted-key events (keyspace
//     notifications of class "e", on the keyevent channel:
//     notify-keyspace-events gains "Ee", keeping what it had; set again at
//     each check) and the store listens to them on one connection of its
//     own per master. The first event refuses every call, with a log line
//     and a count (metricStoreRefusals, reason "evicted"), and the store
//     notes the tenant of each evicted key of its own.
//   - The count: every check reads each master's evicted_keys (INFO
//     stats), which counts from the server's start or from the last
//     acknowledgement (AckEvictions resets it with CONFIG RESETSTAT).
//
// Once records are lost the refusal does not end with the policy: it
// lasts until an operator acknowledges what was lost. The store keeps it
// in the process and in a marker in Redis (<prefix>evictions, a hash:
// when the eviction was noticed, and the tenants whose keys went),
// written when it notices and again at every check while it refuses, so
// that the marker evicted while the policy still evicts is written back,
// and a process started later refuses too. A check passes only when no
// master counts an eviction, the marker names none, and, if this process
// noticed one, the marker counts an acknowledgement since. Evictions
// reports what was lost: the tenants and the audit sequence numbers Redis
// took; AckEvictions acknowledges it (toolctl evictions and toolctl ack).
// After the acknowledgement, a tenant that lost records is answered with
// care for a while (AckEvictions' window): a write whose key has no record
// there may be one whose record went, and its tool's receipt is asked
// before it runs (guard.Entry.MayBeLost).

// evictionState is what this process knows of an eviction that no
// operator has acknowledged yet.
type evictionState struct {
	mu      sync.Mutex
	unacked bool      // an eviction is known and not acknowledged
	since   time.Time // when this process first knew of it
	// acks is the marker's count of acknowledgements when this process
	// last knew of no eviction (or first read the marker): an
	// acknowledgement of what it knows counts one more.
	acks    int64
	read    bool            // the marker was read once
	tenants map[string]bool // tenants whose keys this process heard evicted
	// heard counts the evicted-key events this process heard, by master,
	// since the last acknowledgement it knows of: when it heard as many
	// as a master counts, the tenants it names are all there are.
	heard   map[string]int64
	writing bool // a write of the marker is under way
}

// markerName is the marker's key after the store's prefix.
const markerName = "evictions"

// The marker's fields.
const (
	markEvicted = "evicted" // when the eviction was first noticed, Unix ms
	markAcks    = "acks"    // acknowledgements so far
	markAcked   = "acked"   // the last one: "<Unix ms> <operator>"
	markTenant  = "tenant:" // and the base64url tenant: its keys were evicted
	markHeard   = "heard:"  // and a master's address: the most evicted-key events one store heard from it
	markGap     = "gap:"    // and the base64url tenant: "<Unix ms>", until when its writes ask receipts (MayBeLost)
	// markEvery is the tenant of markGap that stands for every tenant:
	// the stores did not hear every evicted key, so any tenant may have
	// lost records ('*' is not a base64url character).
	markEvery = "*"
)

// markScript writes what a process knows of an eviction into the marker,
// unless an acknowledgement came since it learnt of it (then a check
// decides again). KEYS[1] the marker; ARGV[1] the acknowledgements it
// counted, ARGV[2] when it noticed (Unix ms), ARGV[3] how many heard
// fields follow, then pairs of a heard field and its count (kept if
// larger), then tenant fields.
var markScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'acks') or '0') ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSETNX', KEYS[1], 'evicted', ARGV[2])
local n = tonumber(ARGV[3])
for i = 4, 3 + 2 * n, 2 do
  if tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0') < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
for i = 4 + 2 * n, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], '1') end
return 1
`)

// noticed records that the master at addr evicted key: every call is
// refused until an operator acknowledges it, and the marker says so.
func (s *Store) noticed(addr, key string) {
	ev := &s.ev
	ev.mu.Lock()
	if !ev.unacked {
		ev.unacked, ev.since = true, time.Now()
	}
	if ev.heard == nil {
		ev.heard = map[string]int64{}
	}
	ev.heard[addr]++
	if t, ok := s.tenantOf(key); ok {
		if ev.tenants == nil {
			ev.tenants = map[string]bool{}
		}
		ev.tenants[t] = true
	}
	start := !ev.writing
	ev.writing = true
	ev.mu.Unlock()
	if start {
		// One write for a burst of events: they come by the thousand.
		go func() {
			time.Sleep(markerDelay)
			ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
			defer cancel()
			s.mark(ctx)
		}()
	}
}

// markerDelay is how long the events of a burst are gathered before the
// marker is written.
const markerDelay = 20 * time.Millisecond

// mark writes what this process knows of an unacknowledged eviction into
// the marker (markScript). A write that fails is made again by the next
// check.
func (s *Store) mark(ctx context.Context) {
	ev := &s.ev
	ev.mu.Lock()
	ev.writing = false
	if !ev.unacked {
		ev.mu.Unlock()
		return
	}
	args := make([]any, 0, 3+2*len(ev.heard)+len(ev.tenants))
	args = append(args, ev.acks, ev.since.UnixMilli(), len(ev.heard))
	for addr, n := range ev.heard {
		args = append(args, markHeard+addr, n)
	}
	for t := range ev.tenants {
		args = append(args, markTenant+enc.EncodeToString([]byte(t)))
	}
	ev.mu.Unlock()
	_ = markScript.Run(ctx, s.rdb, []string{s.prefix + markerName}, args...).Err()
}

// tenantOf returns the tenant of one of the store's keys of a tenant.
func (s *Store) tenantOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"{t")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok {
		return "", false
	}
	b, err := enc.DecodeString(tag)
	return string(b), err == nil
}

// unacknowledged decides, at a check, whether an eviction waits for an
// operator's acknowledgement: one counted by a master (counted, its
// evicted_keys), one the marker names, or one this process noticed that
// no acknowledgement has followed. It keeps the marker written while one
// waits, and the tenants that lost records after the last one.
func (s *Store) unacknowledged(ctx context.Context, counted bool) (bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.prefix+markerName).Result()
	if err != nil {
		return false, err
	}
	acks, _ := strconv.ParseInt(m[markAcks], 10, 64)
	ev := &s.ev
	ev.mu.Lock()
	if !ev.read {
		// An eviction heard before the marker was first read (the
		// subscription comes first) is acknowledged by the next one.
		ev.read, ev.acks = true, acks
	}
	if ev.unacked && acks > ev.acks && !counted && m[markEvicted] == "" {
		ev.unacked, ev.tenants = false, nil // acknowledged
	}
	if !ev.unacked {
		if acks > ev.acks {
			ev.heard = nil // the masters count from the acknowledgement on
		}
		ev.acks = acks
		if counted || m[markEvicted] != "" {
			ev.unacked, ev.since = true, time.Now()
			if ms, err := strconv.ParseInt(m[markEvicted], 10, 64); err == nil {
				ev.since = time.UnixMilli(ms)
			}
		}
	}
	waiting := ev.unacked
	ev.mu.Unlock()
	if waiting {
		s.mark(ctx)
	}
	gaps := map[string]int64{}
	for f, v := range m {
		if t, ok := strings.CutPrefix(f, markGap); ok {
			if t != markEvery {
				b, err := enc.DecodeString(t)
				if err != nil {
					continue
				}
				t = string(b)
			}
			gaps[t], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	s.gaps.Store(&gaps)
	return waiting, nil
}

// lostRecords reports whether the tenant lost records that an operator
// acknowledged, within the window the acknowledgement gave, at now (the
// guard's clock).
func (s *Store) lostRecords(tenant string, now time.Time) bool {
	g := s.gaps.Load()
	if g == nil || len(*g) == 0 {
		return false
	}
	until, ok := (*g)[tenant]
	if every, all := (*g)[markEvery]; all && (!ok || every > until) {
		until, ok = every, true
	}
	return ok && now.UnixMilli() < until
}

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

// evicted refuses every call from now on, until an operator acknowledges
// what was lost and a Check passes: the server at addr evicted key.
func (s *Store) evicted(addr, key string) {
	s.evictions.Add(1)
	s.noticed(addr, key)
	s.refuse(fmt.Errorf("%w (%s evicted %s)", ErrEvicted, addr, key), reasonEvicted, evictedMessage, "server", addr, "key", key)
}

// evictedMessage is the log line of an eviction.
const evictedMessage = "idem: the Redis server evicted keys; every call is refused (UNAVAILABLE) until an operator acknowledges what was lost " +
	"(toolctl evictions, then toolctl ack) and a check passes"

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

// The refusal reasons of metricStoreRefusals that evicted.go and
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
