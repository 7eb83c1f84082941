package idem

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/internal/redisconn"
)

// AuditTenants returns the tenants whose audit log (stream or chain head)
// the store's server holds, sorted: every master is scanned (SCAN, in
// batches; no blocking command) for the keys of this store's prefix. It is
// for operators (toolctl gaps), not for the dispatch path.
func (s *Store) AuditTenants(ctx context.Context) ([]string, error) {
	pattern := globEscape(s.prefix) + "{t*}:audit*"
	var (
		mu    sync.Mutex
		found = map[string]bool{}
	)
	err := redisconn.ForEachMaster(ctx, s.rdb, func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			if tenant, ok := s.auditTenant(it.Val()); ok {
				mu.Lock()
				found[tenant] = true
				mu.Unlock()
			}
		}
		return it.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for t := range found {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}

// auditTenant reads the tenant of an audit stream or head key of this
// store ("<prefix>{t<base64url tenant>}:audit" or ":audit:head").
func (s *Store) auditTenant(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"{t")
	if !ok {
		return "", false
	}
	enc64, suffix, ok := strings.Cut(rest, "}")
	if !ok || (suffix != ":audit" && suffix != ":audit:head") {
		return "", false
	}
	b, err := enc.DecodeString(enc64)
	if err != nil {
		return "", false
	}
	return string(b), true
}
