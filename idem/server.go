package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/internal/redisconn"
)

// Errors about the server, from Check and from the store's calls.
var (
	// ErrEvictionPolicy: a server whose maxmemory-policy may evict the
	// store's keys, and Options.AllowEviction is not set.
	ErrEvictionPolicy = errors.New("idem: the Redis maxmemory-policy must be noeviction " +
		"(an evicted record makes an acknowledged write run again); set Options.AllowEviction to accept it")
	// ErrTooFewReplicas: a master with fewer connected replicas than
	// Options.Replicas.
	ErrTooFewReplicas = errors.New("idem: a master has fewer connected replicas than Options.Replicas")
	// ErrNotReplicated: a state change that fewer than Options.Replicas
	// replicas acknowledged within Options.ReplicaTimeout.
	ErrNotReplicated = errors.New("idem: too few replicas acknowledged the change")
)

// Check reads every master's configuration and refuses a server the store
// cannot keep its promises on: a maxmemory-policy other than noeviction
// (unless Options.AllowEviction), or fewer connected replicas than
// Options.Replicas. A server that does not report its policy in INFO (an
// embedded test server) is accepted. The store runs Check before its first
// state change, until it passes once; call it at start to fail early.
func (s *Store) Check(ctx context.Context) error {
	err := redisconn.ForEachMaster(ctx, s.rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := redisconn.Info(ctx, c) // the default sections: memory and replication
		if err != nil {
			return err
		}
		if p, ok := info["maxmemory_policy"]; ok && p != "noeviction" && !s.opts.AllowEviction {
			return fmt.Errorf("%w (%s has %s)", ErrEvictionPolicy, c.Options().Addr, p)
		}
		if s.opts.Replicas > 0 {
			if n, _ := strconv.Atoi(info["connected_slaves"]); n < s.opts.Replicas {
				return fmt.Errorf("%w (%s has %d, want %d)", ErrTooFewReplicas, c.Options().Addr, n, s.opts.Replicas)
			}
		}
		return nil
	})
	if err == nil {
		s.checked.Store(true)
	}
	return err
}

// contextTimeoutEnabled reports whether a client bounds its reads and
// writes by the caller's deadline. Clients of other types are trusted.
func contextTimeoutEnabled(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// run runs a script and returns its reply. Before the store's first state
// change it checks the server. With Options.Replicas, the script and a WAIT
// go in one pipeline to the master of the keys; a reply that too few
// replicas acknowledged is returned with ErrNotReplicated.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, argv []any) ([]string, error) {
	if !s.checked.Load() {
		if err := s.Check(ctx); err != nil {
			return nil, err
		}
	}
	if s.opts.Replicas <= 0 {
		return sc.Run(ctx, s.rdb, keys, argv...).StringSlice()
	}
	node, err := s.master(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	reply, acked, err := s.runWait(ctx, node, sc, keys, argv)
	if redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") {
		// The slot is moving: let the cluster client follow it, then wait
		// on the master that now holds it (one round trip more).
		if reply, err = sc.Run(ctx, s.rdb, keys, argv...).StringSlice(); err != nil {
			return nil, err
		}
		if node, err = s.master(ctx, keys[0]); err != nil {
			return nil, err
		}
		var n int64
		n, err = node.Wait(ctx, s.opts.Replicas, s.opts.ReplicaTimeout).Result()
		acked = int(n)
	}
	if err != nil {
		return nil, err
	}
	if acked < s.opts.Replicas {
		return reply, fmt.Errorf("%w: %d of %d", ErrNotReplicated, acked, s.opts.Replicas)
	}
	return reply, nil
}

// runWait pipelines the script with WAIT on one server: EVALSHA, and EVAL
// again when the server does not have the script yet.
func (s *Store) runWait(ctx context.Context, node *redis.Client, sc *redis.Script, keys []string, argv []any) ([]string, int, error) {
	cmd, wait := s.pipeWait(ctx, node, func(p redis.Pipeliner) *redis.Cmd { return sc.EvalSha(ctx, p, keys, argv...) })
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = s.pipeWait(ctx, node, func(p redis.Pipeliner) *redis.Cmd { return sc.Eval(ctx, p, keys, argv...) })
	}
	reply, err := cmd.StringSlice()
	if err != nil {
		return nil, 0, err
	}
	n, err := wait.Int()
	return reply, n, err
}

func (s *Store) pipeWait(ctx context.Context, node *redis.Client, script func(redis.Pipeliner) *redis.Cmd) (cmd, wait *redis.Cmd) {
	pipe := node.Pipeline()
	cmd = script(pipe)
	wait = pipe.Do(ctx, "WAIT", s.opts.Replicas, s.opts.ReplicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	return cmd, wait
}

// master returns the server that holds key: the client itself, or on a
// cluster the master of the key's slot.
func (s *Store) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, errors.New("idem: Options.Replicas needs a *redis.Client or *redis.ClusterClient")
}
