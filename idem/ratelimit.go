package idem

// Rate limits. Limiter is the guard's own rate limiter: a per-tenant, per-tool
// limit shared by every worker through Redis, with the GCRA algorithm of
// github.com/go-redis/redis_rate (one Lua script, one key, one round trip).
//
//	lim, err := idem.NewLimiter(rdb, func(tenant, tool string) redis_rate.Limit {
//		if tool == "create_refund_draft" {
//			return redis_rate.PerMinute(10)
//		}
//		return redis_rate.PerSecond(20)
//	}, idem.LimiterOptions{})
//	g := guard.New(tools, store, guard.Options{Checks: []guard.Check{lim.Check}})
//
// A limited call is answered RATE_LIMIT with retry_after_ms (recovery
// retry_after): nothing ran, and the model may try again after the wait.
//
// Time: the limiter uses the Redis server's clock (the script calls TIME),
// not the guard's Clock. GCRA only compares the server's times with each
// other, so workers' clocks need not agree, but a guard with a fake or
// shifted Clock does not move the limiter's time.

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
)

// LimitFunc returns the limit of a tool for a tenant. A zero Limit (or one
// with Rate ≤ 0) means no limit.
type LimitFunc func(tenant, tool string) redis_rate.Limit

// LimiterOptions configure a Limiter. The zero value means the defaults.
type LimiterOptions struct {
	// Prefix starts every key after redis_rate's own "rate:"; default
	// "tg:rl:". It must not contain '{' or '}'.
	Prefix string
	// FailOpen lets calls through when Redis cannot be asked. By default
	// they fail closed: UNAVAILABLE, nothing ran, retry later.
	FailOpen bool
	// OnError, if set, is told about every Redis error (for the host's
	// logs); the model never sees it.
	OnError func(ctx context.Context, err error)
}

// Limiter limits calls per tenant and tool. It is safe for concurrent use.
type Limiter struct {
	lim    *redis_rate.Limiter
	limit  LimitFunc
	prefix string
	opts   LimiterOptions
}

// rateKeyPrefix is what redis_rate puts before every key it names.
const rateKeyPrefix = "rate:"

// NewLimiter returns a limiter on the client (a server or a cluster).
func NewLimiter(rdb redis.UniversalClient, limit LimitFunc, opts LimiterOptions) (*Limiter, error) {
	if opts.Prefix == "" {
		opts.Prefix = "tg:rl:"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, ErrBadPrefix
	}
	return &Limiter{lim: redis_rate.NewLimiter(rdb), limit: limit, prefix: opts.Prefix, opts: opts}, nil
}

var rateEnc = base64.RawURLEncoding

// key names the limiter's key of a tenant and tool, without redis_rate's
// "rate:": prefix{t<base64url(tenant)>}:base64url(tool). Both ids are
// encoded, so no name can hold the braces of the hash tag or the colon
// between the parts, and hostile names cannot collide. The hash tag is the
// store's (package idem), never empty: a tenant's limits share the cluster
// slot of its records.
func (l *Limiter) key(tenant, tool string) string {
	var b strings.Builder
	b.Grow(len(l.prefix) + rateEnc.EncodedLen(len(tenant)) + rateEnc.EncodedLen(len(tool)) + 4)
	b.WriteString(l.prefix)
	b.WriteString("{t")
	b.WriteString(rateEnc.EncodeToString([]byte(tenant)))
	b.WriteString("}:")
	b.WriteString(rateEnc.EncodeToString([]byte(tool)))
	return b.String()
}

// Key returns the Redis key that holds the state of a tenant's tool, as
// stored (with redis_rate's "rate:" in front), for operators.
func (l *Limiter) Key(tenant, tool string) string { return rateKeyPrefix + l.key(tenant, tool) }

// normalize makes a limit safe for the GCRA script: a zero or negative
// rate is no limit; a burst below 1 would refuse every call and is 1; a
// period of zero or less is one second.
func normalize(lim redis_rate.Limit) (redis_rate.Limit, bool) {
	if lim.Rate <= 0 {
		return lim, false
	}
	if lim.Burst < 1 {
		lim.Burst = 1
	}
	if lim.Period <= 0 {
		lim.Period = time.Second
	}
	return lim, true
}

// Allow takes one call from the tenant's budget for the tool. It returns
// nil when the tool has no limit for the tenant.
func (l *Limiter) Allow(ctx context.Context, tenant, tool string) (*redis_rate.Result, error) {
	lim, ok := normalize(l.limit(tenant, tool))
	if !ok {
		return nil, nil
	}
	return l.lim.Allow(ctx, l.key(tenant, tool), lim)
}

// Reset forgets the budget a tenant has used of a tool.
func (l *Limiter) Reset(ctx context.Context, tenant, tool string) error {
	return l.lim.Reset(ctx, l.key(tenant, tool))
}

// Check is the guard.Check: it runs after approval, before execution, and
// answers a call over the limit with guard.RateLimited and the wait until
// one call would be allowed, rounded up to the millisecond.
//
// The contract's order still holds: the store applies the call id and
// idempotency key checks before it records the RATE_LIMIT, so a retry of a
// call that already has a result gets that result (a replay or conflict)
// even while limited — but it has used up budget, as every call that
// reaches the checks does (replays included: the limiter runs before the
// store is asked).
func (l *Limiter) Check(ctx context.Context, inv *guard.Invocation) error {
	res, err := l.Allow(ctx, inv.Principal.TenantID, inv.Proposal.Name)
	if err != nil {
		if l.opts.OnError != nil {
			l.opts.OnError(ctx, err)
		}
		if l.opts.FailOpen {
			return nil
		}
		return guard.NewError(guard.CodeUnavailable, "The rate limiter is unavailable; nothing changed.")
	}
	if res == nil || res.Allowed > 0 {
		return nil
	}
	wait := (res.RetryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
	if wait < time.Millisecond {
		wait = time.Millisecond
	}
	return guard.RateLimited(wait, nil)
}
