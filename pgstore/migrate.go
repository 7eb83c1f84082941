package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The schema's versions, sql/<version>.sql, applied in order, each in a
// transaction of its own that also records it in the schema's migrations
// table. A version is never edited once released: a change is a new one.
//
//go:embed sql/*.sql
var migrations embed.FS

// schemaVersion is the newest version this store knows.
const schemaVersion = 3

// minServer is the oldest server_version_num the store works with.
const minServer = 130000

// migrate checks the server and brings the schema to version target (New:
// schemaVersion; a test: an older one, as an older store left it), under a
// session advisory lock of the schema's, so that processes starting at
// once wait for each other and migrate once.
func (s *Store) migrate(ctx context.Context, target int) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return errorf("connecting: %w", err)
	}
	defer conn.Release()
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return errorf("reading the server's version: %w", err)
	}
	if err := checkVersion(version); err != nil {
		return err
	}
	// A schema at this version needs nothing created: a role with the
	// rights on it but not CREATE on the database uses it as it is.
	if current, err := s.version(ctx, conn.Conn()); err != nil {
		return err
	} else if current >= target {
		return nil
	}
	lock := int64(s.lockSeed ^ 0x6d6967726174696f) // "migratio"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return errorf("waiting for the migration lock: %w", err)
	}
	defer func() {
		// A lock the unlock could not release goes with its session: the
		// connection is closed when the unlock fails.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema+
		";\nCREATE TABLE IF NOT EXISTS "+s.schema+".migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return permission(err, "create the schema "+s.schema)
	}
	current, err := s.version(ctx, conn.Conn())
	if err != nil || current >= target {
		return err
	}
	crypto, err := s.pgcrypto(ctx, conn.Conn())
	if err != nil {
		return err
	}
	for v := current + 1; v <= target; v++ {
		text, err := migrations.ReadFile("sql/" + strconv.Itoa(v) + ".sql")
		if err != nil {
			return errorf("schema version %d: %w", v, err)
		}
		sql := strings.NewReplacer("@S@", s.schema, "@C@", crypto).Replace(string(text))
		err = pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+s.schema+".migrations (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return permission(err, fmt.Sprintf("migrate schema %s to version %d", s.schema, v))
		}
	}
	return nil
}

// version returns the schema's version, 0 when it has none yet, and
// refuses one newer than this store's.
func (s *Store) version(ctx context.Context, conn *pgx.Conn) (int, error) {
	var current int
	err := conn.QueryRow(ctx, "SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 ELSE -1 END", s.schema+".migrations").Scan(&current)
	if err == nil && current == -1 {
		err = conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.schema+".migrations").Scan(&current)
	}
	switch {
	case err != nil:
		return 0, permission(err, "read "+s.schema+".migrations")
	case current > schemaVersion:
		return 0, errorf("schema %s is at version %d, newer than this store's %d: upgrade the library", s.schema, current, schemaVersion)
	}
	return current, nil
}

// checkVersion refuses a server_version_num before minServer.
func checkVersion(version int) error {
	if version < minServer {
		return fmt.Errorf("%w (it is %d.%d); upgrade the server", ErrServerTooOld, version/10000, version%10000)
	}
	return nil
}

// cryptoSchema is where the store creates pgcrypto when the database has
// none: a schema of its own, so that dropping a store's schema never drops
// the extension other stores' functions call.
const cryptoSchema = "toolguard_pgcrypto"

// pgcrypto returns the quoted schema of the pgcrypto extension, creating
// it (in cryptoSchema) if the database has none: its digest computes the
// audit chain's SHA-1 (guard.AuditRecord.Link) in the transaction that appends a
// record. pgcrypto is a trusted extension: a role that may create in the
// database may create it. Stores of several schemas starting at once
// create it once, under a lock of the database's.
func (s *Store) pgcrypto(ctx context.Context, conn *pgx.Conn) (string, error) {
	const find = "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'"
	var nsp string
	err := conn.QueryRow(ctx, find).Scan(&nsp)
	if errors.Is(err, pgx.ErrNoRows) {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7421000233)"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+cryptoSchema+";\nCREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA "+cryptoSchema)
			return err
		})
		if err != nil {
			return "", permission(err, "create the pgcrypto extension (its digest computes the audit chain's SHA-1)")
		}
		err = conn.QueryRow(ctx, find).Scan(&nsp)
	}
	if err != nil {
		return "", errorf("finding the pgcrypto extension: %w", err)
	}
	return pgx.Identifier{nsp}.Sanitize(), nil
}

// permission wraps err, naming what the store tried to do, in
// ErrPermission when the server refused the role.
func permission(err error, what string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "0A000" || pe.Code == "58P01") {
		// insufficient_privilege; feature_not_supported and
		// undefined_file: an extension that is not installed on the server.
		return fmt.Errorf("%w: could not %s: %s (%s); grant the role CREATE on the database, or have an owner run the store once",
			ErrPermission, what, pe.Message, pe.Code)
	}
	return errorf("could not %s: %w", what, err)
}
