package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/pgstore"
)

// TestUnreachableIsFast: New on a server that refuses connections, or on
// one that accepts them and never answers (a paused proxy), returns an
// error within Options.Timeout; a step whose server stops answering
// mid-way returns within it too, and the guard answers UNAVAILABLE.
func TestUnreachableIsFast(t *testing.T) {
	const timeout = time.Second
	ctx := context.Background()
	refused := pgtest.Pool(t, "postgres://postgres@127.0.0.1:1/none?connect_timeout=30", 1)
	t0 := time.Now()
	if _, err := pgstore.New(ctx, refused, pgstore.Options{Timeout: timeout}); err == nil || time.Since(t0) > timeout+time.Second {
		t.Fatalf("a refused connection: %v after %v", err, time.Since(t0))
	}
	db := pgtest.NewDB(t)
	via, proxy := proxied(t, db)
	pool := pgtest.Pool(t, strings.Replace(via, "connect_timeout=5", "connect_timeout=30", 1), 2)
	proxy.Pause()
	t0 = time.Now()
	_, err := pgstore.New(ctx, pool, pgstore.Options{Timeout: timeout})
	if err == nil || time.Since(t0) > timeout+time.Second {
		t.Fatalf("a server that never answers: %v after %v, want an error within %v", err, time.Since(t0), timeout)
	}
	proxy.Restore()
	s, err := pgstore.New(ctx, pool, pgstore.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	w := newGuardOn(s)
	proxy.Pause()
	t0 = time.Now()
	res, err := w.Dispatch(ctx, readCall("c1"))
	if err != nil || res.Code != guard.CodeUnavailable || time.Since(t0) > 2*timeout+time.Second {
		t.Fatalf("a read whose server stopped answering: %v, %v after %v; want UNAVAILABLE within the store's timeout", res, err, time.Since(t0))
	}
	proxy.Restore()
}

// TestPermissionRefused: a role that may not create the store's schema
// gets ErrPermission, naming what it could not do, at once; once an owner
// made the schema (and pgcrypto), the role may use the store with the
// rights on it.
func TestPermissionRefused(t *testing.T) {
	srv := pgtest.StartServer(t, pgtest.ServerOptions{})
	db := srv.CreateDB("app")
	srv.Exec("CREATE ROLE agent LOGIN")
	srv.Exec(`REVOKE CREATE ON DATABASE app FROM PUBLIC`)
	agentURL := strings.Replace(db, "postgres@", "agent@", 1)
	ctx := context.Background()
	agentPool := pgtest.Pool(t, agentURL, 1)
	t0 := time.Now()
	_, err := pgstore.New(ctx, agentPool, pgstore.Options{})
	if !errors.Is(err, pgstore.ErrPermission) || !strings.Contains(err.Error(), `create the schema "toolguard"`) || time.Since(t0) > 5*time.Second {
		t.Fatalf("a role without CREATE: %v after %v; want ErrPermission naming the schema", err, time.Since(t0))
	}
	// An owner migrates; the agent gets the rights on the schema.
	owner := pgtest.Pool(t, db, 1)
	if _, err := pgstore.New(ctx, owner, pgstore.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"GRANT USAGE ON SCHEMA toolguard, toolguard_pgcrypto TO agent",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA toolguard TO agent"} {
		if _, err := owner.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := pgstore.New(ctx, agentPool, pgstore.Options{})
	if err != nil {
		t.Fatalf("the agent on a migrated schema: %v", err)
	}
	if res, err := newGuardOn(s).Dispatch(ctx, readCall("c1")); err != nil || res.Code != guard.CodeOK {
		t.Fatalf("the agent's read: %v %v", res, err)
	}
}

// newGuardOn returns a guard over the store with guardtest's tools.
func newGuardOn(s *pgstore.Store) *guard.Guard {
	return guard.New(guardTools(), s, guard.Options{})
}

// readCall is guardtest's get of key a by alice, call id callID.
func readCall(callID string) guard.Call {
	return guard.Call{Principal: alice, Proposal: guard.Proposal{Name: "get", Arguments: []byte(`{"key":"a"}`)},
		Context: guard.ExecutionContext{Provider: "test", CallID: callID}}
}

// guardTools are guardtest's tools.
func guardTools() guard.Tools { return guardtest.NewDownstream().Tools() }
