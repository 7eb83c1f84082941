package redisconn_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
)

// busyScript does enough work for INFO commandstats to see it.
var busyScript = redis.NewScript(`local s = 0
for i = 1, 50000 do s = s + i end
redis.call('SET', KEYS[1], s)
return s`)

// TestServerStats: script time, CPU and memory move when a server works,
// on a standalone server and summed over a cluster's masters.
func TestServerStats(t *testing.T) {
	for _, be := range []struct {
		name string
		open func(testing.TB) redis.UniversalClient
	}{{"standalone", redistest.Standalone}, {"cluster", redistest.Cluster}} {
		t.Run(be.name, func(t *testing.T) {
			rdb := be.open(t)
			ctx := context.Background()
			prefix := redistest.Prefix(t)
			scripts, cpu := redisconn.ScriptTime(ctx, rdb), redisconn.ServerCPU(ctx, rdb)
			if mem := redisconn.UsedMemory(ctx, rdb); mem == 0 {
				t.Fatal("used memory 0")
			}
			for i := range 200 {
				// Tags spread the keys over a cluster's masters.
				key := prefix + "{" + string(rune('a'+i%26)) + "}:stats"
				if err := busyScript.Run(ctx, rdb, []string{key}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if d := redisconn.ScriptTime(ctx, rdb) - scripts; d <= 0 {
				t.Errorf("script time moved by %v over 200 scripts", d)
			}
			if d := redisconn.ServerCPU(ctx, rdb) - cpu; d <= 0 {
				t.Errorf("server CPU moved by %v over 200 scripts", d)
			}
			_ = redisconn.DeletePrefix(ctx, rdb, prefix)
		})
	}
}

// TestServerStatsRefused: a server without INFO sections (miniredis) gives
// zeros, not errors or panics.
func TestServerStatsRefused(t *testing.T) {
	_, rdb := redistest.Mini(t)
	ctx := context.Background()
	if redisconn.ScriptTime(ctx, rdb) != 0 || redisconn.ServerCPU(ctx, rdb) != 0 || redisconn.UsedMemory(ctx, rdb) != 0 {
		t.Fatal("miniredis has no INFO; want zeros")
	}
}
