// Package idem is the Redis store of toolguard: call-id bindings,
// idempotency records with leases, results and the hash-chained audit log,
// through go-redis against a standalone server or a Redis Cluster
// (redis.UniversalClient).
//
// Each state change is one Lua script, so it is atomic and costs one round
// trip: a read or a failed check is one (Finish), a fresh write two (Reserve,
// Commit), a replay or conflict one. All keys of a tenant share a hash tag
// ({t<base64url(tenant)>}), so every script is legal on a cluster.
//
// Time-based decisions (leases) use the guard's clock, passed in by the
// guard; Redis TTLs only collect garbage. The audit log of a tenant is a
// Redis stream whose entry ids are the record sequence numbers, and it has
// no TTL.
package idem

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Prefix starts every key; default "tg:". It must not contain '{' or
	// '}', which would change the cluster hash tag.
	Prefix string
	// TTL is how long call bindings, idempotency records, results and
	// operation indexes are kept after their last change; default 7 days.
	// It only collects garbage: no decision depends on it.
	TTL time.Duration
	// AuditTTL, when set, makes a tenant's whole audit log (stream and
	// chain head) expire after that long without a new record. The
	// default, zero, keeps audit logs until they are exported and trimmed
	// (docs/operations.md): an audit log is evidence, and a trimmed log
	// stays verifiable from its anchor while an expired one is gone.
	AuditTTL time.Duration
}

// DefaultTTL is the retention of records when Options.TTL is zero.
const DefaultTTL = 7 * 24 * time.Hour

// Store implements guard.Store on Redis.
type Store struct {
	rdb        redis.UniversalClient
	prefix     string
	ttlMS      any // boxed once
	auditTTLMS any
}

var _ guard.Store = (*Store)(nil)

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/finish.lua
	finishSrc string
	//go:embed lua/reserve.lua
	reserveSrc string
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/status.lua
	statusSrc string
	//go:embed lua/settle.lua
	settleSrc string

	finishScript  = redis.NewScript(prelude + finishSrc)
	reserveScript = redis.NewScript(prelude + reserveSrc)
	commitScript  = redis.NewScript(prelude + commitSrc)
	statusScript  = redis.NewScript(prelude + statusSrc)
	settleScript  = redis.NewScript(prelude + settleSrc)
)

// ErrBadPrefix is returned by New for a prefix with a brace.
var ErrBadPrefix = errors.New("idem: key prefix must not contain '{' or '}'")

// New returns a store on the client.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = "tg:"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, ErrBadPrefix
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	opts.TTL = max(opts.TTL, time.Millisecond) // Redis TTLs are whole milliseconds
	if opts.AuditTTL < 0 {
		opts.AuditTTL = 0
	}
	return &Store{rdb: rdb, prefix: opts.Prefix, ttlMS: boxMS(opts.TTL), auditTTLMS: boxMS(opts.AuditTTL)}, nil
}

// AuditKeys returns the names of the tenant's audit stream and chain head,
// for operators who export or inspect them with other tools.
func (s *Store) AuditKeys(tenantID string) (stream, head string) {
	k := makeKeys(s.prefix, tenantID, "", "", "", "")
	return k.audit, k.head
}

// Client returns the Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Boxed once: a string put in an interface allocates unless it is a
// constant, and every script call passes about twenty.
var (
	boxedFlags       = [2]any{"0", "1"}
	boxedEffects     = [2]any{"r", "w"}
	boxedZero    any = "0"
	boxedCodes       = func() map[guard.Code]any {
		m := map[guard.Code]any{0: ""}
		for _, c := range guard.Codes() {
			m[c] = c.String()
		}
		return m
	}()
	boxedSides = map[guard.SideEffect]any{guard.SideEffectNone: string(guard.SideEffectNone),
		guard.SideEffectYes: string(guard.SideEffectYes), guard.SideEffectUnknown: string(guard.SideEffectUnknown)}
)

func flag(b bool) any {
	if b {
		return boxedFlags[1]
	}
	return boxedFlags[0]
}

func boxCode(c guard.Code) any {
	if v, ok := boxedCodes[c]; ok {
		return v
	}
	return ""
}

func boxSide(s guard.SideEffect) any {
	if v, ok := boxedSides[s]; ok {
		return v
	}
	return string(s)
}

func boxMS(d time.Duration) any {
	if d <= 0 {
		return boxedZero
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// args builds KEYS and ARGV as laid out in lua/prelude.lua.
func (s *Store) args(e *guard.Entry, callID string, extra string) ([]string, []any) {
	k := makeKeys(s.prefix, e.TenantID, e.SubjectID, callID, e.IdempotencyKey, e.OperationID)
	bodySum := sha256.Sum256(e.AuditBody)
	effect := boxedEffects[0]
	if e.Effect == guard.Write {
		effect = boxedEffects[1]
	}
	return k.list(), []any{
		e.Fingerprint,
		strconv.FormatInt(e.Now.UnixMilli(), 10),
		flag(callID != ""),
		flag(e.IdempotencyKey != ""),
		boxCode(e.Code),
		string(e.Data),
		e.Message,
		boxMS(e.RetryAfter),
		boxSide(e.SideEffect),
		string(e.AuditBody),
		hex.EncodeToString(bodySum[:]),
		s.ttlMS,
		e.OperationID,
		e.Tool,
		effect,
		extra,
		callID,
		e.IdempotencyKey,
		s.auditTTLMS,
	}
}

// Finish implements guard.Store.
func (s *Store) Finish(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	keys, argv := s.args(e, e.CallID, "")
	reply, err := finishScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return nil, err
	}
	return parseResult(reply)
}

// Reserve implements guard.Store.
func (s *Store) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, string, error) {
	var t [16]byte
	_, _ = rand.Read(t[:])
	token := hex.EncodeToString(t[:])
	keys, argv := s.args(e, e.CallID, token)
	argv = append(argv, strconv.FormatInt(lease.Milliseconds(), 10))
	reply, err := reserveScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return nil, "", err
	}
	if len(reply) == 2 && reply[0] == "T" {
		return nil, reply[1], nil
	}
	res, err := parseResult(reply)
	return res, "", err
}

// Commit implements guard.Store.
func (s *Store) Commit(ctx context.Context, e *guard.Entry, token string) (*guard.Result, error) {
	keys, argv := s.args(e, e.CallID, token)
	reply, err := commitScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return nil, err
	}
	return parseResult(reply)
}

// Status implements guard.Store.
func (s *Store) Status(ctx context.Context, q *guard.Entry) (*guard.Result, *guard.Pending, error) {
	keys, argv := s.args(q, "", "")
	reply, err := statusScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return nil, nil, err
	}
	if len(reply) == 6 && reply[0] == "P" {
		return nil, &guard.Pending{Tool: reply[1], IdempotencyKey: reply[2], Fingerprint: reply[3],
			CallID: reply[4], OperationID: reply[5]}, nil
	}
	res, err := parseResult(reply)
	return res, nil, err
}

// Settle implements guard.Store.
func (s *Store) Settle(ctx context.Context, q *guard.Entry, p *guard.Pending, found bool, data []byte) (*guard.Result, error) {
	e := *q
	e.Code = 0
	e.Data = data
	keys, argv := s.args(&e, p.CallID, "")
	argv[4] = flag(found)
	reply, err := settleScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return nil, err
	}
	return parseResult(reply)
}

// parseResult reads the reply {'R', code, delivery, data, msg, retry, op}.
func parseResult(reply []string) (*guard.Result, error) {
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
	h, err := s.rdb.Get(ctx, headKey).Result()
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		// A head kept by an earlier version, as a hash; the next record
		// appended replaces it.
		var f []any
		if f, err = s.rdb.HMGet(ctx, headKey, "seq", "hash").Result(); err == nil {
			seq, _ := f[0].(string)
			hash, _ := f[1].(string)
			h = seq + " " + hash
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
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
			Body:       []byte(str("body")),
			Code:       code,
			Delivery:   guard.Delivery(str("delivery")),
			SideEffect: guard.SideEffect(str("side")),
			PrevHash:   str("prev"),
			Hash:       str("hash"),
		})
	}
	return out, head, nil
}
