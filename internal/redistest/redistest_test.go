package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMini(t *testing.T) {
	mr, rdb := Mini(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	mr.FastForward(2 * time.Second)
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("Exists after expiry = %d, %v", n, err)
	}
}

func TestPrefixUnique(t *testing.T) {
	a, b := Prefix(t), Prefix(t)
	if a == b || !strings.HasPrefix(a, "tgtest:") || !strings.HasSuffix(a, ":") {
		t.Fatalf("prefixes %q, %q", a, b)
	}
	if strings.ContainsAny(a, "{}*?[]\\") {
		t.Fatalf("prefix %q has special characters", a)
	}
}

func TestClusterAddrs(t *testing.T) {
	got := clusterAddrs(" a:1, b:2 ,,c:3,")
	if strings.Join(got, "|") != "a:1|b:2|c:3" {
		t.Fatalf("clusterAddrs = %q", got)
	}
	if clusterAddrs("") != nil {
		t.Fatal("empty input should give no addrs")
	}
}

func TestGlobEscape(t *testing.T) {
	if got := globEscape(`a*b?c[d]e\f`); got != `a\*b\?c\[d\]e\\f` {
		t.Fatalf("globEscape = %q", got)
	}
}

// TestBackends runs a Lua script against every backend: keys sharing a hash
// tag so it is also valid on a cluster.
func TestBackends(t *testing.T) {
	ran := map[string]bool{}
	ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ran[t.Name()] = true
		ctx := context.Background()
		p := Prefix(t)
		keys := []string{p + "{x}:a", p + "{x}:b"}
		script := redis.NewScript(`
			redis.call("SET", KEYS[1], ARGV[1])
			redis.call("SET", KEYS[2], ARGV[1] .. "!")
			return redis.call("GET", KEYS[2])`)
		got, err := script.Run(ctx, rdb, keys, "hi").Text()
		if err != nil || got != "hi!" {
			t.Fatalf("script = %q, %v", got, err)
		}
	})
	if !ran["TestBackends/"+BackendMiniredis] {
		t.Fatal("miniredis backend did not run")
	}
}

func TestRealSkipWhenUnset(t *testing.T) {
	for _, b := range Backends()[1:] {
		t.Run(b.Name, func(t *testing.T) {
			t.Setenv(EnvURL, "")
			t.Setenv(EnvCluster, "")
			var skipped bool
			st := &skipRecorder{TB: t, skipped: &skipped}
			func() {
				defer func() { _ = recover() }()
				b.Open(st)
			}()
			if !skipped {
				t.Fatal("expected Skip when env var unset")
			}
			// The message names the variable and how to run the test.
			env := map[string]string{BackendStandalone: EnvURL, BackendCluster: EnvCluster}[b.Name]
			if !strings.HasPrefix(st.msg, env+" not set: ") || !strings.Contains(st.msg, "scripts/test.sh") {
				t.Errorf("skip message %q does not name %s and scripts/test.sh", st.msg, env)
			}
		})
	}
}

// skipRecorder intercepts Skip so the test can observe it without skipping.
type skipRecorder struct {
	testing.TB
	skipped *bool
	msg     string
}

func (s *skipRecorder) Skip(args ...any) {
	*s.skipped = true
	s.msg = fmt.Sprint(args...)
	panic("skip")
}

// TestPrefixCleanup checks that keys under a Prefix are deleted from real
// servers when the test that created the prefix ends.
func TestPrefixCleanup(t *testing.T) {
	for _, b := range Backends()[1:] {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Open(t)
			ctx := context.Background()
			var keys []string
			t.Run("inner", func(t *testing.T) {
				p := Prefix(t)
				// Spread keys over slots (and so over cluster masters).
				for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
					keys = append(keys, p+s)
					if err := rdb.Set(ctx, p+s, "v", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
			})
			for _, k := range keys {
				if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
					t.Fatalf("key %q after cleanup: exists=%d err=%v", k, n, err)
				}
			}
		})
	}
}
