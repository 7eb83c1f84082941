package tgmcp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// StateStore keeps what the replicas of a fleet share beside the guard's
// records: the answers given to approval questions (each request state is
// answered once, by any replica) and the tasks of the Tasks extension
// (tasks/get works on any replica, and after a restart). Every value lives
// until its TTL has passed, so nothing of an expired question or task is
// kept for ever. NewRedisStateStore keeps them in Redis; without
// Options.State a server keeps them in its own memory, which is right for
// one process only.
//
// An error means the store could not do its job (unreachable, timed out);
// the server then runs nothing and answers UNAVAILABLE.
type StateStore interface {
	// Claim stores value under key for ttl unless the key holds a value
	// already, and returns the value the key holds afterwards: value when
	// this call stored it, the earlier one otherwise.
	Claim(ctx context.Context, key string, value []byte, ttl time.Duration) ([]byte, error)
	// Get returns the value under key, or nil when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Swap stores value under key for ttl if the key still holds old, and
	// reports whether it did.
	Swap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error)
}

// RedisStateStore is a StateStore in Redis, standalone or Cluster: each
// operation is one command or one Lua script on one key.
type RedisStateStore struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisStateStore returns a store on rdb (a client that honours
// deadlines, e.g. with ContextTimeoutEnabled, as idem.New wants) whose keys
// start with prefix; default "tg-mcp:". Replicas of one fleet must use the
// same server and prefix. Like the guard's store, the server must not evict
// keys (maxmemory-policy noeviction): an evicted answer lets its request
// state be answered again, though the guard still runs its operation once.
func NewRedisStateStore(rdb redis.UniversalClient, prefix string) *RedisStateStore {
	if prefix == "" {
		prefix = "tg-mcp:"
	}
	return &RedisStateStore{rdb: rdb, prefix: prefix}
}

var (
	claimScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]`)
	swapScript = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)
)

// ttlMillis is a TTL as Redis takes it: whole milliseconds, at least one.
func ttlMillis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Claim implements StateStore.
func (s *RedisStateStore) Claim(ctx context.Context, key string, value []byte, ttl time.Duration) ([]byte, error) {
	v, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, value, ttlMillis(ttl)).Text()
	if err != nil {
		return nil, err
	}
	return []byte(v), nil
}

// Get implements StateStore.
func (s *RedisStateStore) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// Swap implements StateStore.
func (s *RedisStateStore) Swap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	n, err := swapScript.Run(ctx, s.rdb, []string{s.prefix + key}, old, value, ttlMillis(ttl)).Int()
	return n == 1, err
}

// memStateStore is the StateStore of a server without Options.State: its
// own memory, swept of expired values as it goes.
type memStateStore struct {
	mu     sync.Mutex
	values map[string]memValue
	sweep  time.Time // when expired values were last removed
}

type memValue struct {
	v       []byte
	expires time.Time
}

// sweepEvery is how often the memory store removes expired values.
const sweepEvery = time.Minute

// live returns the unexpired value under key; it sweeps expired values
// now and then. Its caller holds mu.
func (m *memStateStore) live(key string, now time.Time) ([]byte, bool) {
	if m.values == nil {
		m.values = map[string]memValue{}
	}
	if now.Sub(m.sweep) > sweepEvery {
		for k, v := range m.values {
			if !now.Before(v.expires) {
				delete(m.values, k)
			}
		}
		m.sweep = now
	}
	v, ok := m.values[key]
	if !ok || !now.Before(v.expires) {
		return nil, false
	}
	return v.v, true
}

// Claim implements StateStore.
func (m *memStateStore) Claim(_ context.Context, key string, value []byte, ttl time.Duration) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if v, ok := m.live(key, now); ok {
		return v, nil
	}
	m.values[key] = memValue{v: append([]byte(nil), value...), expires: now.Add(ttl)}
	return value, nil
}

// Get implements StateStore.
func (m *memStateStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, _ := m.live(key, time.Now())
	return v, nil
}

// Swap implements StateStore.
func (m *memStateStore) Swap(_ context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if v, ok := m.live(key, now); !ok || string(v) != string(old) {
		return false, nil
	}
	m.values[key] = memValue{v: append([]byte(nil), value...), expires: now.Add(ttl)}
	return true, nil
}

// stateKey joins the parts of a StateStore key with ':'.
func stateKey(parts ...string) string { return strings.Join(parts, ":") }
