// Package redisconn opens go-redis clients from the address forms the
// commands accept: a redis:// (or rediss://) URL for one server, or a
// comma-separated host:port list for a Redis Cluster.
package redisconn

import (
	"context"
	"strings"
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
		c = redis.NewClient(opt)
	} else {
		addrs := strings.Split(addr, ",")
		if len(addrs) == 1 {
			c = redis.NewClient(&redis.Options{Addr: addrs[0], PoolSize: poolSize})
		} else {
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: poolSize})
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
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	}
	return nil
}

// RoundTrips is a go-redis hook that counts round trips: one per command,
// one per pipeline. Add it with client.AddHook.
type RoundTrips struct{ n atomic.Int64 }

// Count returns the round trips so far.
func (c *RoundTrips) Count() int64 { return c.n.Load() }

// Reset sets the count to zero.
func (c *RoundTrips) Reset() { c.n.Store(0) }

// DialHook implements redis.Hook.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}

// ProcessPipelineHook implements redis.Hook.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}
