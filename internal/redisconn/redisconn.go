// Package redisconn opens go-redis clients from the address forms the
// commands accept: a redis:// (or rediss://) URL for one server, or a
// comma-separated host:port list for a Redis Cluster.
package redisconn

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Open returns a client for addr and checks that it answers. poolSize 0
// means go-redis's default.
func Open(addr string, poolSize int) (redis.UniversalClient, error) {
	var c redis.UniversalClient
	if strings.Contains(addr, "://") {
		opt, err := redis.ParseURL(addr)
		if err != nil {
			return nil, err
		}
		if poolSize > 0 {
			opt.PoolSize = poolSize
		}
		opt.ContextTimeoutEnabled = true // calls honour their deadline
		c = redis.NewClient(opt)
	} else {
		addrs := strings.Split(addr, ",")
		if len(addrs) == 1 {
			c = redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addrs[0], PoolSize: poolSize})
		} else {
			c = redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs, PoolSize: poolSize})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// DeletePrefix deletes every key that starts with prefix (SCAN and UNLINK,
// on every master of a cluster). The prefix must not contain glob
// characters.
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			// One key per UNLINK: on a cluster node, keys of one batch may
			// still span slots.
			for _, k := range batch {
				if err := c.Unlink(ctx, k).Err(); err != nil {
					return err
				}
			}
			batch = batch[:0]
			return nil
		}
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	return ForEachMaster(ctx, rdb, del)
}

// RoundTrips is a go-redis hook that counts round trips: one per command,
// one per pipeline. Add it with client.AddHook.
type RoundTrips struct{ n, cmds atomic.Int64 }

// Count returns the round trips so far.
func (c *RoundTrips) Count() int64 { return c.n.Load() }

// Commands returns the commands sent so far: a pipeline's count each.
func (c *RoundTrips) Commands() int64 { return c.cmds.Load() }

// Reset sets the counts to zero.
func (c *RoundTrips) Reset() { c.n.Store(0); c.cmds.Store(0) }

// DialHook implements redis.Hook.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connSetup(cmd) {
			c.n.Add(1)
			c.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

// connSetup reports whether cmd is one a new connection sends before its
// first use (HELLO, AUTH, SELECT, CLIENT SETINFO): not the workload's round
// trips, and not repeated once the pool is warm.
func connSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client":
		return true
	}
	return false
}

// ProcessPipelineHook implements redis.Hook.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !connSetup(cmds[0]) {
			c.n.Add(1)
			c.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// ScriptTime sums the time Redis spent executing scripts and functions
// (EVALSHA, EVAL and FCALL, from INFO commandstats) over the client's
// masters: the server-side cost of the Lua, without network and parsing.
// It is 0 if INFO is refused.
func ScriptTime(ctx context.Context, rdb redis.UniversalClient) time.Duration {
	usec := sumInfo(ctx, rdb, "commandstats", func(field, stats string) (float64, bool) {
		if field != "cmdstat_evalsha" && field != "cmdstat_eval" && field != "cmdstat_fcall" {
			return 0, false
		}
		// calls=…,usec=…,usec_per_call=…
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				return n, err == nil
			}
		}
		return 0, false
	})
	return time.Duration(usec) * time.Microsecond
}

// ServerCPU sums used_cpu_user and used_cpu_sys (INFO cpu) over the
// client's masters: the CPU time the servers have used. It is 0 if INFO is
// refused.
func ServerCPU(ctx context.Context, rdb redis.UniversalClient) time.Duration {
	return time.Duration(sumInfo(ctx, rdb, "cpu", numbers("used_cpu_user", "used_cpu_sys")) * 1e9)
}

// UsedMemory sums used_memory (INFO memory) over the client's masters, in
// bytes. It is 0 if INFO is refused.
func UsedMemory(ctx context.Context, rdb redis.UniversalClient) uint64 {
	return uint64(sumInfo(ctx, rdb, "memory", numbers("used_memory")))
}

// numbers reads the named fields of an INFO section as plain numbers.
func numbers(names ...string) func(field, text string) (float64, bool) {
	return func(field, text string) (float64, bool) {
		if !slices.Contains(names, field) {
			return 0, false
		}
		f, err := strconv.ParseFloat(text, 64)
		return f, err == nil
	}
}

// sumInfo sums, over the masters, what value reads from the "field:text"
// lines of an INFO section.
func sumInfo(ctx context.Context, rdb redis.UniversalClient, section string, value func(field, text string) (float64, bool)) float64 {
	var mu sync.Mutex
	var total float64
	_ = ForEachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, section).Result()
		if err != nil {
			return nil // refused: counts as 0
		}
		for _, line := range strings.Split(info, "\n") {
			field, text, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			if f, ok := value(field, text); ok {
				mu.Lock()
				total += f
				mu.Unlock()
			}
		}
		return nil
	})
	return total
}

// ForEachMaster calls fn with each master of a cluster (concurrently), or
// with the client. Other client types are not visited.
func ForEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return nil
}

// Info returns the "field:value" lines of one server's INFO: the default
// sections when none is named.
func Info(ctx context.Context, c *redis.Client, sections ...string) (map[string]string, error) {
	text, err := c.Info(ctx, sections...).Result()
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if field, value, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[field] = value
		}
	}
	return fields, nil
}

// ContextTimeoutEnabled reports whether a client bounds its reads and
// writes by the caller's deadline (its options' ContextTimeoutEnabled).
// Clients of other types are trusted.
func ContextTimeoutEnabled(rdb redis.UniversalClient) bool {
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
