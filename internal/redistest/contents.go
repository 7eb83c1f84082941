package redistest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Contents returns everything rdb's server (every master of a cluster)
// holds under the keys that match (a SCAN pattern; "*" for all), as raw
// text: each key's name, then its value or its members, fields and stream
// entries. Tests that assert what Redis must never hold search it.
func Contents(tb testing.TB, rdb redis.UniversalClient, match string) string {
	tb.Helper()
	ctx := context.Background()
	var (
		mu sync.Mutex
		b  strings.Builder
	)
	dump := func(ctx context.Context, c redis.Cmdable) error {
		var keys []string
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		var local strings.Builder
		for _, k := range keys {
			local.WriteString(k)
			local.WriteByte('\n')
			typ, err := c.Type(ctx, k).Result()
			if err != nil {
				return err
			}
			var vals []string
			switch typ {
			case "string":
				vals = []string{c.Get(ctx, k).Val()}
			case "hash":
				for f, v := range c.HGetAll(ctx, k).Val() {
					vals = append(vals, f, v)
				}
			case "list":
				vals = c.LRange(ctx, k, 0, -1).Val()
			case "set":
				vals = c.SMembers(ctx, k).Val()
			case "zset":
				for _, z := range c.ZRangeWithScores(ctx, k, 0, -1).Val() {
					vals = append(vals, z.Member.(string))
				}
			case "stream":
				for _, m := range c.XRange(ctx, k, "-", "+").Val() {
					for f, v := range m.Values {
						vals = append(vals, f, v.(string))
					}
				}
			case "none":
				// Gone since the scan (expired, or another test's).
			default:
				tb.Errorf("redistest.Contents: key %s of type %s", k, typ)
			}
			for _, v := range vals {
				local.WriteString(v)
				local.WriteByte('\n')
			}
		}
		mu.Lock()
		b.WriteString(local.String())
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return dump(ctx, c) })
	} else {
		err = dump(ctx, rdb)
	}
	if err != nil {
		tb.Fatalf("redistest.Contents: %v", err)
	}
	return b.String()
}
