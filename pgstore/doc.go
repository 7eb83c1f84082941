// Package pgstore is the Postgres store of toolguard: call-id bindings,
// idempotency records with leases, results, single-use grants, budgets and
// the hash-chained audit log per tenant, in a schema of the application's
// own database, through pgx v5. It keeps the rules of a guard.Store (its doc
// numbers them; guard/guardtest checks them), and one more thing no other
// store can: transactional writes (WriteTx), whose effect is rows in the
// same database and commits with their outcome and audit record, so that
// their outcome is never unknown.
//
// Each store step is one call of a PL/pgSQL function of the store's
// schema, one round trip and one transaction: a read or a failed check is
// one (Finish), a fresh write two (Reserve, Commit), a replay or conflict
// one. Steps that race take advisory locks of the call id, the key and the
// operation id they touch, in one order; the audit record is appended
// last, under an advisory lock of the tenant's head held until the
// transaction ends, so a tenant's appends take turns and its chain has no
// gap and no fork. So a tenant's dispatches commit one at a time: one
// tenant's rate on one server is bounded by its commit latency
// (docs/performance.md, "One tenant's dispatches take turns").
//
// A transactional write is one transaction: BEGIN; the reservation, which
// locks the key; the tool's statements through the pgx.Tx it is given;
// then the outcome's commit step and COMMIT, sent together. A crash
// anywhere before COMMIT leaves nothing (the reservation was never
// visible); a concurrent call of the same key, and a status query of it,
// wait for the lock and then replay what committed. A COMMIT whose reply
// is lost is settled by asking Postgres (pg_xact_status of the
// transaction's id, taken in the reservation), never guessed.
//
// # Usage
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db/app?connect_timeout=5")
//	store, err := pgstore.New(ctx, pool, pgstore.Options{}) // creates or migrates schema "toolguard"
//	refund := pgstore.WriteTx("create_refund_draft", "Draft a refund.",
//		func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in RefundIn) (Draft, error) {
//			var d Draft
//			err := tx.QueryRow(ctx, `INSERT INTO refund_drafts (order_id, amount) VALUES ($1, $2) RETURNING id, amount`,
//				in.OrderID, in.Amount).Scan(&d.ID, &d.Amount)
//			return d, err
//		}, &toolset.Options[RefundIn, Draft]{NeedsApproval: true})
//	g := guard.New(toolset.MustNew(refund), store, guard.Options{Signer: signer})
//
// The server must be PostgreSQL 13 or later, with the pgcrypto extension
// available (New creates it, in a schema toolguard_pgcrypto, when the
// database has none: it is a trusted extension). The role needs CREATE on
// the database the first time, to create the schema; once the schema is at
// this version, USAGE on the two schemas and the rights on the store's
// tables are enough. New returns ErrServerTooOld or ErrPermission, or the
// connection's error, within Options.Timeout: never a hang. Give the pool
// room for the agents that dispatch at once (pgxpool's default is 4
// connections, or the number of CPUs): a transactional write holds one
// connection while its tool runs, and a duplicate waiting for it another.
//
// Operators list and settle ordinary writes whose outcome nobody knows
// with Unsettled and Resolve (cmd/toolctl -store postgres://…), and
// delete what retention let go with Sweep (the store sweeps on its own).
//
// What is kept and for how long (Options.TTL, Sweep), which Postgres
// settings keep an acknowledged write through a failover, and what each
// fault does are in docs/operations.md and docs/reliability.md.
package pgstore
