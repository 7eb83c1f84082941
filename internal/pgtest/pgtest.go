// Package pgtest gives tests a Postgres: a database of their own on the
// machine's server (TOOLGUARD_POSTGRES_URL, default the local server on
// 127.0.0.1:5432 as user postgres), created for the test and dropped after
// it, or servers of their own (initdb) for tests that stop, kill or promote
// them (server.go). A machine without a server skips those tests with the
// reason; under CI (CI=true) a missing server fails them instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the server tests use when TOOLGUARD_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?connect_timeout=5"

// URL returns the server tests use: TOOLGUARD_POSTGRES_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("TOOLGUARD_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Unavailable skips tb (or fails it under CI) because the server cannot be
// used, saying why.
func Unavailable(tb testing.TB, why string) {
	tb.Helper()
	msg := "no Postgres for this test: " + why + " (set TOOLGUARD_POSTGRES_URL to a server where the user may create databases; CI runs one on 127.0.0.1:5432)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// NewDB creates a database of the test's own, named tg_pg_<16 hex
// digits>, on the server URL names, and returns its URL. Its commits do
// not wait for the disk (synchronous_commit off). It is dropped (WITH
// FORCE: connections left open are closed) when the test ends.
func NewDB(tb testing.TB) string {
	tb.Helper()
	return NewDBOn(tb, URL())
}

// NewDBOn is NewDB on the server base names.
func NewDBOn(tb testing.TB, base string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		Unavailable(tb, err.Error())
	}
	defer admin.Close(context.Background())
	var r [8]byte
	_, _ = rand.Read(r[:])
	name := "tg_pg_" + hex.EncodeToString(r[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		Unavailable(tb, "creating a database: "+err.Error())
	}
	// Its commits do not wait for the disk: these tests are not about
	// durability (those start servers of their own, server.go), and a
	// crash of the machine loses only a test's database.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET synchronous_commit = off"); err != nil {
		tb.Logf("pgtest: %v", err)
	}
	tb.Cleanup(func() { Drop(tb, base, name) })
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	// In the clear: a TCP proxy between the store and the server (the
	// fault tests') sees what is sent.
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// Drop drops the database name on the server base, closing its
// connections.
func Drop(tb testing.TB, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Logf("pgtest: dropping %s: %v", name, err)
		return
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		tb.Logf("pgtest: dropping %s: %v", name, err)
	}
}

// Pool returns a pool on the database at u with at most size connections
// (0: pgxpool's default), closed when the test ends.
func Pool(tb testing.TB, u string, size int) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		tb.Fatal(err)
	}
	if size > 0 {
		cfg.MaxConns = int32(size)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Name returns a database's name from its URL.
func Name(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return fmt.Sprint(p.Path[1:])
}
