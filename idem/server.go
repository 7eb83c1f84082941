package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/redisconn"
)

// Errors about the server, from Check and from the store's calls.
var (
	// ErrEvictionPolicy: a server whose maxmemory-policy may evict the
	// store's keys, and Options.AllowEviction is not set.
	// Both wrap guard.ErrStoreRefused: the guard answers UNAVAILABLE at
	// once, with no release that would be refused the same way.
	ErrEvictionPolicy = fmt.Errorf("%w: idem: the Redis maxmemory-policy must be noeviction "+
		"(an evicted record makes an acknowledged write run again); set Options.AllowEviction to accept it", guard.ErrStoreRefused)
	// ErrTooFewReplicas: a master with fewer connected replicas than
	// Options.Replicas.
	ErrTooFewReplicas = fmt.Errorf("%w: idem: a master has fewer connected replicas than Options.Replicas", guard.ErrStoreRefused)
	// ErrNotReplicated: a state change that fewer than Options.Replicas
	// replicas acknowledged within Options.ReplicaTimeout.
	ErrNotReplicated = errors.New("idem: too few replicas acknowledged the change")
)

// Check reads every master's configuration and refuses a server the store
// cannot keep its promises on: a maxmemory-policy other than noeviction
// (unless Options.AllowEviction), or fewer connected replicas than
// Options.Replicas. Unless Options.AllowEviction, it also has each master
// tell the store of an eviction when it happens, and reads each master's
// count of evicted keys and the stores' marker (evicted.go): from the
// first evicted key on, every call is refused with ErrEvicted until an
// operator has acknowledged what was lost (AckEvictions) and a Check
// passes again. A server that does not report its policy in INFO (an
// embedded test server) is accepted. Unless Options.Scripts is set, it
// then loads the store's function library on every master (FUNCTION LOAD);
// a server without Redis Functions makes the store send its Lua as scripts
// from then on. The store runs Check before its first state change, until
// it passes; call it at start to fail early. While the store runs it
// checks the configuration again every Options.CheckEvery, in the
// background: a policy or replica count that changed is refused from then
// on, as at start, with a log line and a count
// (the metric toolguard.store.refusals), until a check passes again.
func (s *Store) Check(ctx context.Context) error {
	return s.check(ctx, true)
}

// check is Check; load says whether to load the function library (a
// periodic check reads the configuration only).
func (s *Store) check(ctx context.Context, load bool) error {
	s.nextCheck.Store(time.Now().Add(s.opts.CheckEvery).UnixNano())
	evictions := s.evictions.Load()
	var watched, counted atomic.Bool
	err := redisconn.ForEachMaster(ctx, s.rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := redisconn.Info(ctx, c) // the default sections: memory, stats and replication
		if err != nil {
			return err
		}
		if _, real := info["maxmemory_policy"]; real && !s.opts.AllowEviction {
			watched.Store(true)
			if n, _ := strconv.ParseInt(info["evicted_keys"], 10, 64); n > 0 {
				counted.Store(true) // since its start, or the last acknowledgement
			}
		}
		if p, ok := info["maxmemory_policy"]; ok && p != "noeviction" && !s.opts.AllowEviction {
			return fmt.Errorf("%w (%s has %s)", ErrEvictionPolicy, c.Options().Addr, p)
		}
		if s.opts.Replicas > 0 {
			if n, _ := strconv.Atoi(info["connected_slaves"]); n < s.opts.Replicas {
				return fmt.Errorf("%w (%s has %d, want %d)", ErrTooFewReplicas, c.Options().Addr, n, s.opts.Replicas)
			}
		}
		if _, real := info["maxmemory_policy"]; real && !s.opts.AllowEviction {
			// A server that may come to evict (its policy or its
			// maxmemory changed later) is read by every reservation, and
			// tells the store of an eviction at once.
			s.fence.Store(true)
			s.watch(ctx, c)
		}
		if !load || s.scripts.Load() {
			return nil
		}
		return s.load(ctx, c)
	})
	if watched.Load() {
		// An eviction no operator has acknowledged refuses the server,
		// whatever its policy is now and whatever else failed (evicted.go).
		waiting, merr := s.unacknowledged(ctx, counted.Load())
		switch {
		case waiting:
			err = ErrEvicted
		case merr != nil && err == nil:
			err = merr
		}
	}
	if err == nil && s.evictions.Load() != evictions {
		// The server evicted a key while it was being checked.
		if r := s.refused.Load(); r != nil {
			err = r.err
		}
	}
	switch {
	case err == nil:
		s.evictedSeen.Store(false)
		refused := s.refused.Swap(nil) != nil
		if !s.checked.Swap(true) && refused {
			s.logger.Info("idem: the Redis server is accepted again: writes go on")
		}
	case errors.Is(err, guard.ErrStoreRefused):
		// Refused from here on, as at start; for a server accepted until
		// now, the configuration changed under the store, which refuse
		// logs and counts.
		reason, msg := reasonEvictionPolicy, "idem: the Redis server's configuration changed; every call is refused (UNAVAILABLE) until it is restored"
		switch {
		case errors.Is(err, ErrTooFewReplicas):
			reason = "too_few_replicas"
		case errors.Is(err, ErrEvicted):
			reason, msg = reasonEvicted, evictedMessage
		}
		s.refuse(err, reason, msg, "error", err.Error())
	}
	return err
}

// refuse refuses every call with err until a Check passes. The first
// refusal of a server the store had accepted is logged (msg, with reason
// and attrs) and counted (metricStoreRefusals, attribute reason); so is
// the first eviction since the last check that passed, even when the
// store already refused the server (its policy, read by a reservation):
// an eviction loses records, which an operator must know of.
func (s *Store) refuse(err error, reason, msg string, attrs ...any) {
	s.refused.Store(&refusal{err: err, until: time.Now().Add(refusalHold)})
	accepted := s.checked.Swap(false)
	firstEviction := reason == reasonEvicted && !s.evictedSeen.Swap(true)
	if accepted || firstEviction {
		s.logger.Error(msg, append([]any{"reason", reason}, attrs...)...)
		s.refusals.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// recheck starts a background check of the configuration when the last
// one is CheckEvery old, unless one is running.
func (s *Store) recheck() {
	if s.opts.CheckEvery < 0 || time.Now().UnixNano() < s.nextCheck.Load() || !s.checking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.checking.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		defer cancel()
		_ = s.check(ctx, false)
	}()
}

// checkTimeout bounds a background check.
const checkTimeout = 5 * time.Second

// refusalHold is how long a server Check refused is refused without
// asking it again: the calls of that time answer at once.
const refusalHold = time.Second

// refusal is a Check that refused the server, and until when it stands.
type refusal struct {
	err   error
	until time.Time
}

// run runs a script and returns its reply: FCALL of its function in the
// store's library, or, where the store sends scripts, EVALSHA (EVAL when
// the server does not have the script yet). Before the store's first state
// change it checks the server. With Options.Replicas, the call and a WAIT
// go in one pipeline to the master of the keys; a reply that too few
// replicas acknowledged is returned with ErrNotReplicated. Without, the
// call goes in a pipeline with the calls other goroutines make at the same
// time (batched).
func (s *Store) run(ctx context.Context, sc *script, keys []string, argv []any) ([]string, error) {
	for attempt := 0; ; attempt++ {
		reply, err := s.run1(ctx, sc, keys, argv)
		if len(reply) == 2 && reply[0] == "F" {
			// The fence (evicted.go): the script read nothing and wrote
			// nothing.
			return nil, s.fenced(reply[1])
		}
		if err == nil || !moving(err) {
			return reply, err
		}
		// The slot is moving or its master failing over: the server did
		// not run the script. Try again, while the caller's deadline
		// leaves room for the wait.
		wait := min(moveBackoff<<min(attempt, 5), maxMoveBackoff)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < 2*wait {
			return reply, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return reply, err
		}
	}
}

// The backoff between tries of a call refused by a moving slot: doubling
// from moveBackoff up to maxMoveBackoff.
const (
	moveBackoff    = 5 * time.Millisecond
	maxMoveBackoff = 200 * time.Millisecond
)

// moving reports an error of a cluster whose slot is moving or whose
// master is failing over, answered before the script ran: TRYAGAIN (a
// multi-key call during a slot's migration), MOVED and ASK beyond the
// client's own redirects, CLUSTERDOWN, and LOADING (a restarted master
// reading its data).
func moving(err error) bool {
	for _, p := range [...]string{"TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", "LOADING"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// run1 is one try of run.
func (s *Store) run1(ctx context.Context, sc *script, keys []string, argv []any) ([]string, error) {
	if err := s.admit(ctx); err != nil {
		return nil, err
	}
	if s.opts.Replicas <= 0 {
		return s.batched(ctx, sc, keys, argv)
	}
	node, err := s.master(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	reply, acked, err := s.runWait(ctx, node, sc, keys, argv, false)
	for hop := 0; hop < 3 && err != nil; hop++ {
		// The slot is moving (a MOVED or ASK redirect): run the script and
		// WAIT together on the node the redirect names, which is the one
		// whose replicas must acknowledge the write (one round trip more).
		kind, addr, ok := redirect(err)
		if !ok {
			break
		}
		if node, err = s.nodeAt(ctx, addr); err != nil {
			return nil, err
		}
		reply, acked, err = s.runWait(ctx, node, sc, keys, argv, kind == "ASK")
	}
	if err != nil {
		return nil, err
	}
	if acked < s.opts.Replicas {
		return reply, fmt.Errorf("%w: %d of %d", ErrNotReplicated, acked, s.opts.Replicas)
	}
	return reply, nil
}

// admit lets a state change go to the server: at once while the server is
// accepted (starting a periodic check when one is due), else after a Check
// that passes; a server refused a moment ago is refused again at once.
func (s *Store) admit(ctx context.Context) error {
	if s.checked.Load() {
		s.recheck()
		return nil
	}
	if r := s.refused.Load(); r != nil && time.Now().Before(r.until) {
		return r.err // refused a moment ago: the same answer, at once
	}
	return s.Check(ctx)
}

// batched runs a script through the batcher of the server that holds the
// keys (batch.go): alone and at once if no other call waits, or else in
// one pipeline with the calls queued by then. A call that the server
// refused without running it, for want of the library or the script, then
// goes on alone, on the caller's context, as call would have gone on after
// that answer (answered).
func (s *Store) batched(ctx context.Context, sc *script, keys []string, argv []any) ([]string, error) {
	b := s.batches.of(ctx, keys[0])
	if b == nil {
		return s.call(ctx, sc, keys, argv)
	}
	fcall := !s.scripts.Load()
	reply, piped, err := b.do(batchCall{ctx: ctx, sc: sc, keys: keys, argv: argv, fcall: fcall},
		func() ([]string, error) { return s.call(ctx, sc, keys, argv) })
	if piped && err != nil {
		return s.answered(ctx, sc, keys, argv, fcall, reply, err)
	}
	return reply, err
}

// call runs a script through the client, which routes it to the master of
// the keys: FCALL, or, where the store sends scripts, EVALSHA and then
// EVAL if the server does not have the script yet.
func (s *Store) call(ctx context.Context, sc *script, keys []string, argv []any) ([]string, error) {
	if !s.scripts.Load() {
		reply, err := scriptReply(s.rdb.FCall(ctx, lib.fn(sc), keys, argv...))
		return s.answered(ctx, sc, keys, argv, true, reply, err)
	}
	return scriptReply(sc.eval.Run(ctx, s.rdb, keys, argv...))
}

// answered finishes a call given the server's answer to its FCALL (fcall)
// or EVALSHA. To an FCALL, a node without the library ("Function not
// found": the function did not run) gets it, with every other master, and
// the call is sent again, once; a node that still has no function, or no
// Redis Functions at all, makes the store send scripts from then on,
// starting with this call. To an EVALSHA, NOSCRIPT (the script did not
// run) makes it send the script with EVAL.
func (s *Store) answered(ctx context.Context, sc *script, keys []string, argv []any, fcall bool, reply []string, err error) ([]string, error) {
	if !fcall {
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			return scriptReply(sc.eval.Eval(ctx, s.rdb, keys, argv...))
		}
		return reply, err
	}
	if notLoaded(err) {
		// Every master: the cluster's view is read again first, so the
		// node that answered is among them, even a new one.
		loadErr := redisconn.ForEachMaster(ctx, s.rdb, s.load)
		reply, err = scriptReply(s.rdb.FCall(ctx, lib.fn(sc), keys, argv...))
		if notLoaded(err) && loadErr != nil {
			return nil, loadErr
		}
	}
	if !notLoaded(err) && !noFunctions(err) {
		return reply, err
	}
	s.scripts.Store(true)
	return scriptReply(sc.eval.Run(ctx, s.rdb, keys, argv...))
}

// runWait pipelines the script with WAIT on one server: FCALL, loading the
// library there and calling again once if the server does not have it; or,
// where the store sends scripts, EVALSHA, and EVAL again when the server
// does not have the script yet. After an ASK redirect, ASKING first.
func (s *Store) runWait(ctx context.Context, node *redis.Client, sc *script, keys []string, argv []any, asking bool) ([]string, int, error) {
	var cmd, wait *redis.Cmd
	if !s.scripts.Load() {
		fcall := func(p redis.Pipeliner) *redis.Cmd { return p.FCall(ctx, lib.fn(sc), keys, argv...) }
		cmd, wait = s.pipeWait(ctx, node, asking, fcall)
		if notLoaded(cmd.Err()) {
			if err := s.load(ctx, node); err != nil {
				return nil, 0, err
			}
			cmd, wait = s.pipeWait(ctx, node, asking, fcall)
		}
		if notLoaded(cmd.Err()) || noFunctions(cmd.Err()) {
			s.scripts.Store(true)
			cmd = nil // the function did not run: send the script
		}
	}
	if cmd == nil {
		cmd, wait = s.pipeWait(ctx, node, asking, func(p redis.Pipeliner) *redis.Cmd { return sc.eval.EvalSha(ctx, p, keys, argv...) })
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd, wait = s.pipeWait(ctx, node, asking, func(p redis.Pipeliner) *redis.Cmd { return sc.eval.Eval(ctx, p, keys, argv...) })
		}
	}
	reply, err := scriptReply(cmd)
	if err != nil {
		return nil, 0, err
	}
	n, err := wait.Int()
	return reply, n, err
}

func (s *Store) pipeWait(ctx context.Context, node *redis.Client, asking bool, script func(redis.Pipeliner) *redis.Cmd) (cmd, wait *redis.Cmd) {
	pipe := node.Pipeline()
	if asking {
		pipe.Do(ctx, "ASKING")
	}
	cmd = script(pipe)
	wait = pipe.Do(ctx, "WAIT", s.opts.Replicas, s.opts.ReplicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	return cmd, wait
}

// master returns the server that holds key: the client itself, or on a
// cluster the master of the key's slot.
func (s *Store) master(ctx context.Context, key string) (*redis.Client, error) {
	return masterOf(ctx, s.rdb, key)
}

// masterOf returns the server of rdb that holds key: rdb itself when it is
// a *redis.Client, or on a cluster the master of the key's slot.
func masterOf(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, errors.New("idem: Options.Replicas needs a *redis.Client or *redis.ClusterClient")
}

// redirect reads a cluster redirect, "MOVED <slot> <addr>" or "ASK <slot>
// <addr>", the form the cluster protocol gives it.
func redirect(err error) (kind, addr string, ok bool) {
	if !redis.HasErrorPrefix(err, "MOVED") && !redis.HasErrorPrefix(err, "ASK") {
		return "", "", false
	}
	f := strings.Fields(strings.TrimPrefix(err.Error(), "redis: "))
	if len(f) != 3 {
		return "", "", false
	}
	return f[0], f[2], true
}

// nodeAt returns the cluster's client for the master at addr.
func (s *Store) nodeAt(ctx context.Context, addr string) (*redis.Client, error) {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	err := redisconn.ForEachMaster(ctx, s.rdb, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err == nil && found == nil {
		err = fmt.Errorf("idem: no master at %s, where the cluster redirected", addr)
	}
	return found, err
}
