// Package pgopen opens the Postgres pools of the commands (toolcases,
// toolctl, toolaudit, toolbench) from a postgres:// URL, with the bounds a
// command needs: a connect timeout, and a first round trip that fails fast
// when the server cannot be reached.
package pgopen

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Is reports whether addr names a Postgres server (a postgres:// or
// postgresql:// URL) rather than Redis.
func Is(addr string) bool {
	return strings.HasPrefix(addr, "postgres://") || strings.HasPrefix(addr, "postgresql://")
}

// Open returns a pool on the database at u, with at most size connections
// (0: pgxpool's default), after one round trip within 5 seconds. A URL
// without connect_timeout gets 5 seconds.
func Open(u string, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		cfg.MaxConns = int32(size)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// DropSchema drops a schema of the store's and all it holds.
func DropSchema(ctx context.Context, p *pgxpool.Pool, schema string) error {
	_, err := p.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
