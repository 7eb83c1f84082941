// Package idem is the Redis store of toolguard: call-id bindings,
// idempotency records with leases, results and the hash-chained audit log,
// through go-redis against a standalone server or a Redis Cluster
// (redis.UniversalClient); and Limiter, the guard's rate limit per tenant
// and tool on the same Redis (ratelimit.go).
//
// Each state change is one Lua script, so it is atomic and costs one round
// trip: a read or a failed check is one (Finish), a fresh write two (Reserve,
// Commit), a replay or conflict one. All keys of a tenant share a hash tag
// ({t<base64url(tenant)>}), so every script is legal on a cluster.
// Without Options.Replicas, calls that goroutines make at the same time go
// to their server together, as one pipeline (auto-pipelining): each still
// runs and answers on its own, and a lone call goes alone, at once.
//
// Where the server has Redis Functions (Redis 7.0 and later), the scripts
// are one function library, loaded once on every master by Check (before
// the store's first state change) and called with FCALL. Its name,
// toolguard_<12 hex digits>, carries a hash of its text: each version of
// the store has a library of its own, and two versions run side by side
// during a rolling deploy. A node that answers that it has no such
// function (after FUNCTION FLUSH, a restart without persistence, a
// failover or a reshard to a node that never got it) is given the library
// and the call is sent again, once: the function did not run. Where the
// server has no Redis Functions (before 7.0, miniredis), or with
// Options.Scripts, the store sends the scripts with EVALSHA instead (EVAL
// when the server does not have one yet). The account needs FCALL and
// FUNCTION LOAD, or EVALSHA and EVAL for scripts; docs/operations.md says
// how to remove old libraries.
//
// Time-based decisions (leases) use the guard's clock, passed in by the
// guard; Redis TTLs only collect garbage. The audit log of a tenant is a
// Redis stream whose entry ids are the record sequence numbers, and it has
// no TTL.
//
// # Usage
//
// Give the guard a store on any go-redis client that honours deadlines, check
// the server at start, and verify a tenant's audit chain whenever you like:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	store, err := idem.New(rdb, idem.Options{}) // Options{Replicas: 1} to wait for a replica
//	if err != nil {
//		return err
//	}
//	if err := store.Check(ctx); err != nil { // maxmemory-policy must be noeviction
//		return err
//	}
//	g := guard.New(tools, store, guard.Options{Signer: signer})
//	res, err := g.Dispatch(ctx, call)
//	n, err := guard.VerifyAudit(ctx, store, principal.TenantID) // records checked, or where the chain breaks
//
// An operator settles a stuck or unknown operation with Unsettled and
// Resolve, and after an eviction learns what Redis took and acknowledges it
// with Evictions and AckEvictions (or cmd/toolctl); docs/reliability.md
// says what each Redis fault does and what to configure.
package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/redisconn"
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Prefix starts every key; default "tg:". It must not contain '{' or
	// '}', which would change the cluster hash tag.
	Prefix string
	// TTL is how long call bindings, idempotency records, results and
	// operation indexes are kept from when they are first written (a
	// record: from its reservation; a record settled or resolved later,
	// from then); default 7 days. It only collects garbage: no decision
	// depends on it. docs/operations.md says what each key holds and how
	// much memory a call volume needs.
	TTL time.Duration
	// AuditTTL, when set, makes a tenant's whole audit log (stream and
	// chain head) expire after that long without a new record. The
	// default, zero, keeps audit logs until they are exported and trimmed
	// (docs/operations.md): an audit log is evidence, and a trimmed log
	// stays verifiable from its anchor while an expired one is gone.
	AuditTTL time.Duration
	// Replicas, when above zero, makes every state change wait until that
	// many replicas acknowledged it (Redis WAIT, pipelined with the script:
	// no extra round trip). A reservation that fewer replicas acknowledged
	// within ReplicaTimeout does not let the write run: the guard releases
	// it and answers UNAVAILABLE. With it, a failover to a replica never
	// runs an acknowledged write again (docs/reliability.md). Check
	// refuses a master with fewer connected replicas.
	Replicas int
	// ReplicaTimeout bounds the wait for replicas; default 1s.
	ReplicaTimeout time.Duration
	// AllowEviction accepts a server whose maxmemory-policy may evict keys.
	// By default Check, and so the store's first call, refuses it: an
	// evicted record makes an acknowledged write run again on replay. A
	// policy switched while the store runs is refused by the first script
	// after it, which reads the policy first, and an evicted key as soon as
	// Redis says so, until an operator acknowledges what was lost
	// (evicted.go, AckEvictions).
	AllowEviction bool
	// CheckEvery is how often the store reads its server's configuration
	// again while it runs (Check: maxmemory-policy, connected replicas), in
	// the background, after a call; a change is refused from the next
	// check on (an eviction policy sooner: AllowEviction). Default 5s;
	// negative never checks again after the first pass.
	CheckEvery time.Duration
	// Logger gets a line when a running store's server is refused (its
	// configuration changed) and when it is accepted again; nil means
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider counts those refusals (toolguard.store.refusals); nil means
	// the global provider, a no-op unless the host set one.
	MeterProvider metric.MeterProvider
	// Scripts sends the store's Lua as scripts (EVALSHA) even where the
	// server has Redis Functions: for an account whose ACL forbids
	// FUNCTION LOAD, or a proxy that does not pass FUNCTION and FCALL on.
	// By default the store loads its function library on every master and
	// calls it with FCALL, and sends scripts only where the server has no
	// Redis Functions (before Redis 7.0, miniredis).
	Scripts bool
}

// DefaultTTL is the retention of records when Options.TTL is zero.
const DefaultTTL = 7 * 24 * time.Hour

// defaultCheckEvery is how often a running store checks its server again
// when Options.CheckEvery is zero.
const defaultCheckEvery = 5 * time.Second

// metricStoreRefusals counts the times a running store found its server's
// configuration changed (attribute reason: eviction_policy or
// too_few_replicas) or its server evicted a key (reason: evicted), and
// refused it.
const metricStoreRefusals = "toolguard.store.refusals"

const meterName = "github.com/toolguard/toolguard/idem"

// Store implements guard.Store on Redis.
type Store struct {
	rdb        redis.UniversalClient
	prefix     string
	ttlMS      string
	auditTTLMS string
	opts       Options
	checked    atomic.Bool  // the last Check passed
	nextCheck  atomic.Int64 // when the configuration is checked again, Unix ns
	checking   atomic.Bool  // a background check is running
	logger     *slog.Logger
	refusals   metric.Int64Counter
	refused    atomic.Pointer[refusal] // the last Check that refused the server, until refusalHold has passed
	// scripts: the Lua goes as scripts (EVALSHA), not FCALL. Set by
	// Options.Scripts, a client other than a *redis.Client or
	// *redis.ClusterClient, or a server found to have no Redis Functions;
	// never cleared.
	scripts atomic.Bool
	batches *batchers // the calls that go in pipelines: without Options.Replicas
	// watchers listen to the masters' evicted-key events (evicted.go);
	// evictions counts the events, so that a check that started before
	// one does not accept the server after it.
	watchers  watchers
	evictions atomic.Int64
	// evictedSeen: an eviction was logged and counted since the last
	// check that passed.
	evictedSeen atomic.Bool
	// fence: the scripts read the server's maxmemory-policy (evicted.go).
	// Set by a check of a server that reports its policy, unless
	// Options.AllowEviction.
	fence atomic.Bool
	// ev is what this process knows of an eviction no operator has
	// acknowledged; gaps, the tenants whose records were lost, and until
	// when their writes ask receipts first (evicted.go).
	ev   evictionState
	gaps atomic.Pointer[map[string]int64]
}

var _ guard.Store = (*Store)(nil)

// Errors New returns for a client or options it cannot work with.
var (
	// ErrBadPrefix: a prefix with a brace.
	ErrBadPrefix = errors.New("idem: key prefix must not contain '{' or '}'")
	// ErrNoContextTimeout: a client that ignores the caller's deadline on
	// an open connection. Set ContextTimeoutEnabled: true in its options.
	ErrNoContextTimeout = errors.New("idem: the go-redis client must have ContextTimeoutEnabled: true, " +
		"or a call ignores its caller's deadline while Redis does not answer")
)

// New returns a store on the client. It does no I/O: the server is checked
// (Check) before the store's first state change.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = "tg:"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, ErrBadPrefix
	}
	if !redisconn.ContextTimeoutEnabled(rdb) {
		return nil, ErrNoContextTimeout
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.AuditTTL < 0 {
		opts.AuditTTL = 0
	}
	if opts.ReplicaTimeout <= 0 {
		opts.ReplicaTimeout = time.Second
	}
	if opts.CheckEvery == 0 {
		opts.CheckEvery = defaultCheckEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MeterProvider == nil {
		opts.MeterProvider = otel.GetMeterProvider()
	}
	refusals, err := opts.MeterProvider.Meter(meterName).Int64Counter(metricStoreRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Times a running store found its Redis server's configuration changed and refused it (attribute reason)."))
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, prefix: opts.Prefix, ttlMS: msString(opts.TTL), auditTTLMS: msString(opts.AuditTTL), opts: opts,
		batches: newBatchers(rdb), logger: opts.Logger, refusals: refusals}
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient: // the store knows their masters, to load its library on
		s.scripts.Store(opts.Scripts)
	default:
		s.scripts.Store(true)
	}
	return s, nil
}

// AuditKeys returns the names of the tenant's audit stream and chain head,
// for operators who export or inspect them with other tools.
func (s *Store) AuditKeys(tenantID string) (stream, head string) {
	k := makeKeys(s.prefix, tenantID, "", "", "", "")
	return k.audit, k.head
}

// Client returns the Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// releaseHold is how long a released reservation's tombstone refuses a late
// copy of that reservation: far longer than any client retry of a script.
const releaseHold = time.Minute

// errNoCode: an entry whose outcome has no valid code; refused before any
// change, since its audit link could not be verified.
var errNoCode = errors.New("idem: an entry's outcome has no valid code")

// Finish implements guard.Store.
func (s *Store) Finish(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	if _, ok := guard.ParseCode(e.Code.String()); !ok {
		return nil, errNoCode
	}
	keys, a := s.args(e, e.CallID, releaseHold, guard.ReceiptInconclusive)
	reply, err := s.run(ctx, finishScript, keys, a.argv())
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return nil, err
	}
	return parseResult(reply, a)
}

// Reserve implements guard.Store. With Options.Replicas, a reservation that
// too few replicas acknowledged is an error (ErrNotReplicated): the guard
// then releases it and the write does not run.
func (s *Store) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	if e.Token == "" {
		return nil, errNoToken
	}
	keys, a := s.args(e, e.CallID, lease, guard.ReceiptInconclusive)
	keys = s.spendsGrant(keys, a, e)
	if s.lostRecords(e.TenantID, e.Now) {
		a.gap = "1"
	}
	if e.Charge != nil {
		a.charge = packCharge(e.Charge)
		keys = s.withBudget(keys, a, e.TenantID)
	}
	a.reservation = a.reservationRecord()
	reply, err := s.run(ctx, reserveScript, keys, a.argv())
	if err != nil {
		return nil, err
	}
	switch {
	case len(reply) == 1 && (reply[0] == "T" || reply[0] == "H"):
		e.Reserved = reply[0] == "T" // "H": the token's reservation stood already
		return nil, nil
	case len(reply) == 1 && (reply[0] == "L" || reply[0] == "HL"):
		e.Reserved = reply[0] == "L"
		e.MayBeLost = true
		return nil, nil
	case len(reply) == 2 && reply[0] == "B" && e.Charge != nil:
		v := guard.BudgetRunSpent
		if reply[1] == "2" {
			v = guard.BudgetTenantSpent
		}
		return &guard.Result{Code: guard.CodeBudgetExhausted, Delivery: guard.DeliveryFresh, Message: e.Charge.Refusal(v)}, nil
	}
	return parseResult(reply, a)
}

// Commit implements guard.Store. A commit that too few replicas
// acknowledged still tells the truth, since the write ran; its durable
// reservation keeps a failover from running it again (docs/reliability.md).
func (s *Store) Commit(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	if e.Token == "" {
		return nil, errNoToken
	}
	if _, ok := guard.ParseCode(e.Code.String()); !ok {
		return nil, errNoCode
	}
	keys, a := s.args(e, e.CallID, releaseHold, guard.ReceiptInconclusive)
	keys = s.returnsGrant(keys, e)
	if e.Charge != nil {
		keys = s.withBudget(keys, a, e.TenantID) // the charge is settled
	}
	reply, err := s.run(ctx, commitScript, keys, a.argv())
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return nil, err
	}
	return parseResult(reply, a)
}

// Status implements guard.Store.
func (s *Store) Status(ctx context.Context, q *guard.Entry) (*guard.Result, *guard.Pending, error) {
	keys, a := s.args(q, "", releaseHold, guard.ReceiptInconclusive)
	reply, err := s.run(ctx, statusScript, keys, a.argv())
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return nil, nil, err
	}
	if len(reply) == 7 && reply[0] == "P" {
		return nil, &guard.Pending{Tool: reply[1], IdempotencyKey: reply[2], Fingerprint: shownFP(reply[3]),
			CallID: reply[4], OperationID: reply[5], Lost: reply[6] == "1"}, nil
	}
	res, err := parseResult(reply, a)
	return res, nil, err
}

// Settle implements guard.Store.
func (s *Store) Settle(ctx context.Context, q *guard.Entry, p *guard.Pending, r guard.Receipt, data []byte) (*guard.Result, error) {
	e := *q
	e.Code = 0
	e.Data = data
	keys, a := s.args(&e, p.CallID, releaseHold, r)
	// The reservation may hold a budget charge, which the settle keeps or
	// gives back.
	keys = s.withBudget(keys, a, e.TenantID)
	reply, err := s.run(ctx, settleScript, keys, a.argv())
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return nil, err
	}
	return parseResult(reply, a)
}

var errNoToken = errors.New("idem: a write's entry has no reservation token")

// parseResult reads the reply {'R', code, delivery, data, msg, retry, op},
// or SENT ({'S'}): the outcome the call's arguments a carry, fresh.
func parseResult(reply []string, a *scriptArgs) (*guard.Result, error) {
	if len(reply) == 1 && reply[0] == "S" {
		reply = a.sent()
	}
	if len(reply) != 7 || reply[0] != "R" {
		return nil, fmt.Errorf("idem: unexpected script reply %q", reply)
	}
	code, ok := guard.ParseCode(reply[1])
	if !ok {
		return nil, fmt.Errorf("idem: unknown code %q in store", reply[1])
	}
	res := &guard.Result{Code: code, Delivery: guard.Delivery(reply[2]), Message: reply[4]}
	if reply[3] != "" {
		res.Data = []byte(reply[3])
	}
	if res.Message == "" {
		res.Message = code.DefaultMessage()
	}
	if ms, _ := strconv.ParseInt(reply[5], 10, 64); ms > 0 {
		res.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	if code.Recovery() == guard.RecoveryQueryStatus {
		res.OperationID = reply[6]
	}
	return res, nil
}

// Audit implements guard.Store: records come from the tenant's stream, whose
// entry ids are "<seq>-1".
func (s *Store) Audit(ctx context.Context, tenantID string, after int64, limit int) ([]guard.AuditRecord, guard.AuditHead, error) {
	streamKey, headKey := s.AuditKeys(tenantID)
	var head guard.AuditHead
	h, err := s.readHead(ctx, headKey)
	if err != nil {
		return nil, head, err
	}
	if seq, hash, ok := strings.Cut(h, " "); ok {
		head.Seq, _ = strconv.ParseInt(seq, 10, 64)
		head.Hash = hash
	}
	msgs, err := s.rdb.XRangeN(ctx, streamKey, "("+strconv.FormatInt(after, 10)+"-1", "+", int64(limit)).Result()
	if err != nil {
		return nil, head, err
	}
	out := make([]guard.AuditRecord, 0, len(msgs))
	for _, m := range msgs {
		seqText, _, _ := strings.Cut(m.ID, "-")
		seq, _ := strconv.ParseInt(seqText, 10, 64)
		str := func(k string) string { v, _ := m.Values[k].(string); return v }
		code, _ := guard.ParseCode(str("code"))
		out = append(out, guard.AuditRecord{
			Seq:        seq,
			Body:       decodeBody(str("body")),
			Code:       code,
			Delivery:   guard.Delivery(str("delivery")),
			SideEffect: guard.SideEffect(str("side")),
			PrevHash:   str("prev"),
			Hash:       str("hash"),
		})
	}
	return out, head, nil
}

// readHead reads a tenant's chain head, "<seq> <hash>", or "" when there is
// none.
func (s *Store) readHead(ctx context.Context, headKey string) (string, error) {
	h, err := s.rdb.Get(ctx, headKey).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return h, err
}
