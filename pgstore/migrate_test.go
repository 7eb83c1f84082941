package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/pgtest"
)

// TestMigrateKeepsChain builds a schema at version 1 as a store of that
// version left it, appends to a tenant's audit chain from many
// connections at once, lets New migrate the schema to the newest version
// (whose append takes the tenant's head under an advisory lock instead of
// the head row's), appends again from many connections, and verifies the
// whole chain: one chain across the migration, no sequence number given
// twice, every link and hash as guard.VerifyAudit recomputes it.
func TestMigrateKeepsChain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t), 16)
	old := &Store{pool: pool, schema: pgx.Identifier{"mig"}.Sanitize()}
	if err := old.migrate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const tenant = "tenant-a"
	appendMany := func(from, n, conns int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for c := range conns {
			wg.Go(func() {
				for i := from + c; i < from+n; i += conns {
					body := []byte(fmt.Sprintf(`{"contract":%q,"action":"dispatch","tool":"t%d"}`, guard.AuditContract, i))
					if _, err := pool.Exec(ctx, "SELECT mig.append($1, $2, $3, 'OK', 'fresh', 'no')", []byte(tenant), body, bodySum(body)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("append: %v", err)
		}
	}
	appendMany(0, 40, 8)
	s, err := New(ctx, pool, Options{Schema: "mig", SweepEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	version, err := s.version(ctx, conn.Conn())
	conn.Release()
	if err != nil || version != schemaVersion || schemaVersion < 2 {
		t.Fatalf("after New the schema is at version %d (%v), want %d", version, err, schemaVersion)
	}
	appendMany(40, 400, 16)
	n, err := guard.VerifyAudit(ctx, s, tenant)
	if err != nil || n != 440 {
		t.Fatalf("the chain across the migration: %d records verified, %v; want 440", n, err)
	}
}

// TestMigrateForgetsEmptyOperationID builds a schema at version 2, where
// a write with neither a call id nor an operation id was indexed under
// the empty operation id, and a call binding could hold a copy of the
// result of the record it links, lets New migrate it, and checks that the
// entry and the copy are gone (a binding's result of its own stays), and
// that index_record writes no entry for the empty id any more, while it
// still indexes a named operation (internal/cases TestStoresAgree and
// guardtest check the answers).
func TestMigrateForgetsEmptyOperationID(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t), 4)
	old := &Store{pool: pool, schema: pgx.Identifier{"mig"}.Sanitize()}
	if err := old.migrate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	index := func(op, key string) {
		t.Helper()
		if _, err := pool.Exec(ctx, "SELECT mig.index_record('tenant-a', 'user-1', $1, $2, ''::bytea, 1000, 999999999)",
			[]byte(op), []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	entries := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, "SELECT op, ref FROM mig.ops")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var op, ref []byte
			if err := rows.Scan(&op, &ref); err != nil {
				t.Fatal(err)
			}
			got[string(op)] = string(ref)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	index("", "k:key-1")
	index("op-1", "k:key-2")
	// Two bindings linking committed records: c1 with the record's result
	// stored on it too (as version 2's precheck and settle left it), c2
	// with another result of its own (a conflict answered it first).
	if _, err := pool.Exec(ctx, `INSERT INTO mig.records (tenant, subject, key, state, fp, data, op, until_ms) VALUES
	    ('tenant-a', 'user-1', 'k:key-2', 'C', 'fp', '{"v":1}', 'op-1', 999999999),
	    ('tenant-a', 'user-1', 'k:key-5', 'C', 'fp5', '{"v":5}', 'op-5', 999999999);
	  INSERT INTO mig.bindings (tenant, subject, call_id, fp, code, data, link, until_ms) VALUES
	    ('tenant-a', 'user-1', 'c1', 'fp', 'OK', '{"v":1}', 'k:key-2', 999999999),
	    ('tenant-a', 'user-1', 'c2', 'other', 'NOT_FOUND', NULL, 'k:key-5', 999999999)`); err != nil {
		t.Fatal(err)
	}
	codes := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, "SELECT call_id, coalesce(code, '') FROM mig.bindings")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var call []byte
			var code string
			if err := rows.Scan(&call, &code); err != nil {
				t.Fatal(err)
			}
			got[string(call)] = code
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := entries(); len(got) != 2 || got[""] != "k:key-1" {
		t.Fatalf("version 2 indexed %v, want the empty id and op-1 (the schema this test builds is not version 2's)", got)
	}
	if _, err := New(ctx, pool, Options{Schema: "mig", SweepEvery: -1}); err != nil {
		t.Fatal(err)
	}
	if got := entries(); len(got) != 1 || got["op-1"] != "k:key-2" {
		t.Fatalf("after the migration the index holds %v, want only op-1's entry", got)
	}
	if got := codes(); got["c1"] != "" || got["c2"] != "NOT_FOUND" {
		t.Fatalf("after the migration the bindings hold %v, want c1's copy of its record's result gone and c2's own kept", got)
	}
	index("", "k:key-3")
	index("op-2", "k:key-4")
	if got := entries(); len(got) != 2 || got["op-2"] != "k:key-4" {
		t.Fatalf("the migrated index_record wrote %v, want op-1's and op-2's entries and none for the empty id", got)
	}
}
