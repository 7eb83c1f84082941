// Package redistest provides test helpers for code that talks to Redis through
// go-redis: an in-process miniredis backend that always works, real standalone
// and Redis Cluster backends that are used only when configured through
// environment variables, per-test key prefixes, and a TCP proxy for fault
// injection (see Proxy).
//
// Real servers are configured with:
//
//	TOOLGUARD_REDIS_URL=redis://127.0.0.1:16379/0
//	TOOLGUARD_REDIS_CLUSTER=127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003
//
// scripts/redis-up.sh starts matching servers and prints those two lines;
// scripts/test.sh starts them, runs every test and stops them. When a
// variable is unset the corresponding tests are skipped, with a message
// that names the variable (and, once per test binary, a line on standard
// error); when it is set but the server is unreachable, the test fails.
//
// The package is meant for tests, and for the project's own measuring tools
// (cmd/toolbench uses its delaying Proxy); it is internal, so no user
// imports it.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the environment variable holding a redis:// URL (as accepted
// by redis.ParseURL) of a real standalone Redis server used by Standalone.
const EnvURL = "TOOLGUARD_REDIS_URL"

// EnvCluster names the environment variable holding a comma-separated list of
// host:port seed addresses of a real Redis Cluster used by Cluster.
const EnvCluster = "TOOLGUARD_REDIS_CLUSTER"

// Backend names used by Backends (and as subtest names by ForEachBackend).
const (
	BackendMiniredis  = "miniredis"
	BackendStandalone = "standalone"
	BackendCluster    = "cluster"
)

// setupTimeout bounds connecting to, and cleaning up on, a real server.
const setupTimeout = 10 * time.Second

// Set once a test in this process has used a real backend, so that Prefix
// cleanups know which servers may hold keys that need deleting.
var (
	standaloneUsed atomic.Bool
	clusterUsed    atomic.Bool
)

// Mini starts an in-process miniredis server and returns it together with a
// go-redis client connected to it. Both are closed when tb's test ends. Use
// the returned *miniredis.Miniredis for things only a fake server can do,
// such as FastForward to expire keys.
func Mini(tb testing.TB) (*miniredis.Miniredis, redis.UniversalClient) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
	tb.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// Standalone returns a client for the real standalone Redis server named by
// the TOOLGUARD_REDIS_URL environment variable. It skips the test when the
// variable is unset and fails it when the URL is invalid or the server does
// not answer PING. The client is closed when tb's test ends.
func Standalone(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	url := strings.TrimSpace(os.Getenv(EnvURL))
	if url == "" {
		skipUnconfigured(tb, EnvURL, "real-Redis test")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("redistest: invalid %s=%q: %v", EnvURL, url, err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redistest: %s=%q is set but the server is unreachable: %v (run scripts/redis-up.sh)", EnvURL, url, err)
	}
	standaloneUsed.Store(true)
	return rdb
}

// Cluster returns a client for the real Redis Cluster whose seed addresses are
// listed, comma-separated, in the TOOLGUARD_REDIS_CLUSTER environment
// variable. It skips the test when the variable is unset and fails it when
// any master does not answer PING. The client is closed when tb's test ends.
func Cluster(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	raw := os.Getenv(EnvCluster)
	addrs := clusterAddrs(raw)
	if len(addrs) == 0 {
		skipUnconfigured(tb, EnvCluster, "real-Redis-Cluster test")
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs})
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	})
	if err != nil {
		tb.Fatalf("redistest: %s=%q is set but the cluster is unreachable: %v (run scripts/redis-up.sh)", EnvCluster, raw, err)
	}
	clusterUsed.Store(true)
	return rdb
}

// skipHint is how the skip message tells the reader to run the skipped
// tests.
const skipHint = "scripts/test.sh starts Redis and runs them"

// skipUnconfigured skips tb, naming the unset variable env and how to run
// the test instead.
func skipUnconfigured(tb testing.TB, env, what string) {
	tb.Helper()
	noteSkip(tb, env+" not set", skipHint) // Main names the package's skips at its end
	tb.Skip(env + " not set: skipping " + what + " (" + skipHint + ")")
}

// Skip skips tb for want of something other than Redis (reason, e.g. "no
// chromium binary"), saying how to get it (hint), and records it for the
// package's skip line that Main prints, beside the Redis skips.
func Skip(tb testing.TB, reason, hint string) {
	tb.Helper()
	noteSkip(tb, reason, hint)
	tb.Skip(reason + ": skipping the test (" + hint + ")")
}

func clusterAddrs(raw string) []string {
	var addrs []string
	for _, a := range strings.Split(raw, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// Backend is one Redis flavour a test can run against.
type Backend struct {
	// Name is BackendMiniredis, BackendStandalone or BackendCluster.
	Name string
	// Open returns a client for the backend, closed when tb's test ends. For
	// the real backends it skips tb when the backend is not configured.
	Open func(tb testing.TB) redis.UniversalClient
}

// Backends lists miniredis, the real standalone server and the real cluster,
// in that order, so a test can run the same body against each:
//
//	for _, b := range redistest.Backends() {
//		t.Run(b.Name, func(t *testing.T) {
//			rdb := b.Open(t) // skips if the backend is not configured
//			...
//		})
//	}
func Backends() []Backend {
	return []Backend{
		{Name: BackendMiniredis, Open: func(tb testing.TB) redis.UniversalClient {
			_, rdb := Mini(tb)
			return rdb
		}},
		{Name: BackendStandalone, Open: Standalone},
		{Name: BackendCluster, Open: Cluster},
	}
}

// ForEachBackend runs fn as a subtest of t once per entry of Backends, with a
// fresh client for that backend. Subtests of unconfigured real backends are
// skipped.
func ForEachBackend(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			fn(t, b.Open(t))
		})
	}
}

// Prefix returns a key prefix unique to this call, of the form
// "tgtest:<16 hex digits>:", so tests sharing a real server never see each
// other's keys. It contains no hash-tag braces, so it does not change which
// cluster slot a key maps to.
//
// When tb's test ends, keys starting with the prefix are deleted (SCAN +
// UNLINK, on every master for a cluster) from each real backend that some
// test in this process opened via Standalone or Cluster. miniredis servers
// need no cleanup as they die with their test. Cleanup failures are logged,
// not fatal.
func Prefix(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("redistest: random prefix: %v", err)
	}
	prefix := "tgtest:" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() {
		if err := deletePrefix(prefix); err != nil {
			tb.Logf("redistest: cleaning up keys %q*: %v", prefix, err)
		}
	})
	return prefix
}

// deletePrefix removes keys starting with prefix from the real backends that
// have been used, with short-lived clients of its own so it does not depend
// on the order in which test cleanups run.
func deletePrefix(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	pattern := globEscape(prefix) + "*"
	var errs []error
	if standaloneUsed.Load() {
		if opts, err := redis.ParseURL(strings.TrimSpace(os.Getenv(EnvURL))); err == nil {
			rdb := redis.NewClient(opts)
			errs = append(errs, deleteMatching(ctx, rdb, pattern))
			_ = rdb.Close()
		}
	}
	if clusterUsed.Load() {
		if addrs := clusterAddrs(os.Getenv(EnvCluster)); len(addrs) > 0 {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs})
			errs = append(errs, rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				return deleteMatching(ctx, c, pattern)
			}))
			_ = rdb.Close()
		}
	}
	return errors.Join(errs...)
}

// deleteMatching scans one node and unlinks matching keys one by one, which
// is safe on a cluster master where a batch could span slots.
func deleteMatching(ctx context.Context, c *redis.Client, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return fmt.Errorf("scan %s: %w", c.Options().Addr, err)
		}
		if len(keys) > 0 {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Unlink(ctx, k)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("unlink on %s: %w", c.Options().Addr, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape quotes the characters special to Redis glob patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// RewriteStream replaces the stream at key with its entries passed through
// edit (false drops an entry), as someone with write access to Redis would
// edit or drop records: for tests of tamper detection.
func RewriteStream(tb testing.TB, rdb redis.UniversalClient, key string, edit func(id string, v map[string]any) bool) {
	tb.Helper()
	ctx := context.Background()
	msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		tb.Fatal(err)
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		tb.Fatal(err)
	}
	for _, m := range msgs {
		if !edit(m.ID, m.Values) {
			continue
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: m.ID, Values: m.Values}).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}
