package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/guard"
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Schema is the Postgres schema that holds the store's tables and
	// functions, created by New if it does not exist; default "toolguard".
	// Two stores in one database with different schemas share nothing.
	Schema string
	// TTL is how long call bindings, idempotency records, results,
	// operation indexes, spent grants and budget tokens are kept after
	// their last change, on the guard's clock; default 7 days, as idem's.
	// It only collects garbage: no decision depends on it. Audit logs are
	// kept until an operator trims them (docs/operations.md).
	TTL time.Duration
	// Timeout bounds each of the store's steps whose context has no
	// deadline, and New's own work (connecting, checking the server,
	// migrating the schema); default 10s. A step's context with a
	// deadline is used as it is.
	Timeout time.Duration
	// SettleTimeout bounds how long a transactional write whose COMMIT
	// reply was lost is settled for (the store asks Postgres whether the
	// transaction committed, on a new connection, until it knows);
	// default 10s. Undecided by then, the write is answered IN_PROGRESS:
	// a retry or a status query decides it.
	SettleTimeout time.Duration
	// SweepEvery is how often the store deletes what its retention let go
	// (Sweep), in the background after a step, on the wall clock; default
	// 1 hour; negative never sweeps on its own.
	SweepEvery time.Duration
}

// Store implements guard.Store, guard.TxStore, guard.Budgeter and
// guard.AuditLog on Postgres. It is safe for concurrent use.
type Store struct {
	pool          *pgxpool.Pool
	schema        string // quoted
	ttlMS         int64
	timeout       time.Duration
	settleTimeout time.Duration
	sweepEvery    time.Duration
	lockSeed      uint64
	q             queries
	nextSweep     atomic.Int64 // unix ms of the wall clock
	sweeping      atomic.Bool
}

var (
	_ guard.Store      = (*Store)(nil)
	_ guard.TxStore    = (*Store)(nil)
	_ guard.Budgeter   = (*Store)(nil)
	_ guard.AuditStore = (*Store)(nil)
)

// defaultTTL is the retention of records when Options.TTL is zero.
const defaultTTL = 7 * 24 * time.Hour

// New returns a store on the pool's database, after checking the server
// and creating or migrating its schema (Options.Schema): a Postgres before
// 13, a role that may not create what the store needs, or a server that
// does not answer within Options.Timeout is an error, returned at once.
// Migrations are versioned and run under an advisory lock, so processes
// starting together migrate once. The rows of transactional writes
// (WriteTx) live in the same database: give the store the pool the
// application's own tables are reached through.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = "toolguard"
	}
	if opts.TTL <= 0 {
		opts.TTL = defaultTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.SettleTimeout <= 0 {
		opts.SettleTimeout = 10 * time.Second
	}
	if opts.SweepEvery == 0 {
		opts.SweepEvery = time.Hour
	}
	s := &Store{pool: pool, schema: pgx.Identifier{opts.Schema}.Sanitize(), ttlMS: opts.TTL.Milliseconds(),
		timeout: opts.Timeout, settleTimeout: opts.SettleTimeout, sweepEvery: opts.SweepEvery}
	h := fnv.New64a()
	h.Write([]byte("toolguard pgstore\x00" + opts.Schema))
	s.lockSeed = h.Sum64()
	s.q = newQueries(s.schema)
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.migrate(ctx, schemaVersion); err != nil {
		return nil, err
	}
	s.nextSweep.Store(time.Now().Add(s.sweepEvery).UnixMilli())
	return s, nil
}

// Errors New returns for a server the store cannot use. Each is wrapped
// with the details.
var (
	// ErrServerTooOld: the server is older than PostgreSQL 13, which
	// the store needs (pg_xact_status and xid8 settle a lost COMMIT
	// reply; pgcrypto is a trusted extension from 13 on).
	ErrServerTooOld = errors.New("pgstore: the server is older than PostgreSQL 13")
	// ErrPermission: the role may not create the store's schema or
	// tables, or the pgcrypto extension the audit chain's SHA-1 needs.
	ErrPermission = errors.New("pgstore: the role may not create what the store needs")
)

// bound gives ctx the store's Timeout unless it has a deadline already.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// b returns the bytes of str for a bytea parameter, without a copy (pgx
// only reads them), and an empty, non-nil slice for "": nil would be NULL.
func b(str string) []byte {
	if str == "" {
		return empty
	}
	return unsafe.Slice(unsafe.StringData(str), len(str))
}

var empty = []byte{}

// until is when something changed at now may be forgotten.
func (s *Store) until(now time.Time) int64 { return now.UnixMilli() + s.ttlMS }

// lockKey is the advisory lock of one id of a kind ('c' call id, 'k' key,
// 'o' operation id, 'g' grant, 't' budget token) in a tenant and subject:
// FNV-1a of the store's schema and the length-prefixed fields. Two ids
// that share a lock only wait for each other.
func (s *Store) lockKey(kind byte, tenant, subject, id string) int64 {
	h := s.lockSeed
	mix := func(p string) {
		for _, c := range [...]byte{byte(len(p) >> 24), byte(len(p) >> 16), byte(len(p) >> 8), byte(len(p))} {
			h = (h ^ uint64(c)) * 1099511628211
		}
		for i := 0; i < len(p); i++ {
			h = (h ^ uint64(p[i])) * 1099511628211
		}
	}
	h = (h ^ uint64(kind)) * 1099511628211
	mix(tenant)
	mix(subject)
	mix(id)
	return int64(h)
}

// locks returns the step's advisory locks, sorted and without repeats, so
// that steps take them in one order.
func locks(ks ...int64) []int64 {
	slices.Sort(ks)
	return slices.Compact(ks)
}

// stepLocks are the locks of a step on an entry: its call id (callID, ""
// for none), its key and its operation id.
func (s *Store) stepLocks(e *guard.Entry, callID string, extra ...int64) []int64 {
	ks := make([]int64, 0, 4+len(extra))
	if callID != "" {
		ks = append(ks, s.lockKey('c', e.TenantID, e.SubjectID, callID))
	}
	if e.IdempotencyKey != "" {
		ks = append(ks, s.lockKey('k', e.TenantID, e.SubjectID, e.IdempotencyKey))
	}
	ks = append(ks, s.lockKey('o', e.TenantID, e.SubjectID, e.OperationID))
	return locks(append(ks, extra...)...)
}

func errorf(format string, args ...any) error { return fmt.Errorf("pgstore: "+format, args...) }
