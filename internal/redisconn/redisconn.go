// Package redisconn opens go-redis clients from the address forms the
// commands accept: a redis:// (or rediss://) URL for one server, or a
// comma-separated host:port list for a Redis Cluster.
package redisconn

import (
	"context"
	"strings"
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
