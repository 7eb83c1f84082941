package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/internal/redisconn"
)

// This file is the operator's side of an eviction (evicted.go): what Redis
// took (Evictions), and the acknowledgement that lets the store work again
// (AckEvictions). cmd/toolctl is its command line.

// EvictionReport is what the store's server lost to evictions that no
// operator has acknowledged, as Evictions finds it.
type EvictionReport struct {
	// Since is when a store first noticed the eviction; zero when none
	// noticed one.
	Since time.Time
	// Servers are the masters, each with its policy and the keys it
	// evicted since it started or since the last acknowledgement.
	Servers []EvictingServer
	// Tenants are the tenants that lost keys, sorted by id: the audit
	// records Redis took, the chain heads, and the tenants an evicted-key
	// event named.
	Tenants []LostTenant
	// Unheard: a master counts more evicted keys than any store heard of
	// (no store was listening for a while, or the marker went with what a
	// store had written), so the tenants named may not be all that lost
	// keys: any tenant may have lost records, and AckEvictions treats
	// every tenant as one that did.
	Unheard bool
	// AckedAt and AckedBy are set by AckEvictions: the acknowledgement.
	AckedAt time.Time
	AckedBy string
}

// EvictingServer is one master as Evictions found it.
type EvictingServer struct {
	Addr        string
	Policy      string
	EvictedKeys int64
	// Heard is the most of its evicted keys one store heard of.
	Heard int64
}

// LostTenant is a tenant that lost keys to an eviction.
type LostTenant struct {
	TenantID string
	// Lost are the audit records Redis took, as ranges of sequence
	// numbers. A range whose To is 0 has no known end: the tenant's head
	// and stream both went, so nothing says how far its chain had come.
	Lost []SeqRange
	// HeadLost: the chain's head went, but no record (the next record
	// finds its place from the stream).
	HeadLost bool
	// Named: a store heard one of the tenant's keys evicted (a record, a
	// binding, an index, a budget counter or its audit log).
	Named bool
}

// SeqRange is a range of audit sequence numbers, From to To included; To
// 0 is no known end.
type SeqRange struct{ From, To int64 }

func (r SeqRange) String() string {
	if r.To == 0 {
		return fmt.Sprintf("%d-?", r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Pending reports whether the report holds an eviction no operator has
// acknowledged: a master counts evicted keys, or a store noticed one.
func (r *EvictionReport) Pending() bool {
	if !r.Since.IsZero() {
		return true
	}
	for _, sv := range r.Servers {
		if sv.EvictedKeys > 0 {
			return true
		}
	}
	return false
}

// Evictions reports what the store's server lost to evictions no operator
// has acknowledged: each master's policy and evicted-key count, the marker
// the stores keep (when one noticed, and the tenants whose keys they heard
// evicted), and, for every tenant with an audit log or named by the
// marker, the audit records Redis took. A stream's records are numbered
// without gaps and Redis evicts whole keys, so what went is found from
// what is left: a stream that went, with its head left, took records 1 to
// the head; a stream evicted and written again counts fewer entries added
// than its last number (XINFO STREAM's entries-added, Redis 7.0 and later;
// records trimmed after an export count as added). It reads every master
// (SCAN) and every tenant's head and stream: an operator's command, not a
// dispatch's.
func (s *Store) Evictions(ctx context.Context) (*EvictionReport, error) {
	r := &EvictionReport{}
	var mu sync.Mutex
	err := redisconn.ForEachMaster(ctx, s.rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := redisconn.Info(ctx, c)
		if err != nil {
			return err
		}
		n, _ := strconv.ParseInt(info["evicted_keys"], 10, 64)
		mu.Lock()
		r.Servers = append(r.Servers, EvictingServer{Addr: c.Options().Addr, Policy: info["maxmemory_policy"], EvictedKeys: n})
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(r.Servers, func(a, b EvictingServer) int { return strings.Compare(a.Addr, b.Addr) })
	m, err := s.rdb.HGetAll(ctx, s.prefix+markerName).Result()
	if err != nil {
		return nil, err
	}
	if ms, err := strconv.ParseInt(m[markEvicted], 10, 64); err == nil {
		r.Since = time.UnixMilli(ms)
	}
	for i := range r.Servers {
		sv := &r.Servers[i]
		sv.Heard, _ = strconv.ParseInt(m[markHeard+sv.Addr], 10, 64)
		if sv.Heard < sv.EvictedKeys {
			r.Unheard = true
		}
	}
	named := map[string]bool{}
	for f := range m {
		if t, ok := strings.CutPrefix(f, markTenant); ok {
			if b, err := enc.DecodeString(t); err == nil {
				named[string(b)] = true
			}
		}
	}
	tenants, err := s.AuditTenants(ctx)
	if err != nil {
		return nil, err
	}
	for t := range named {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	for _, t := range tenants {
		lt, err := s.lostOf(ctx, t)
		if err != nil {
			return nil, err
		}
		lt.Named = named[t]
		if len(lt.Lost) > 0 || lt.HeadLost || lt.Named {
			r.Tenants = append(r.Tenants, lt)
		}
	}
	return r, nil
}

// lostOf finds the audit records the tenant lost: from its head, "<seq>
// <hash>", and its stream's history.
func (s *Store) lostOf(ctx context.Context, tenant string) (LostTenant, error) {
	lt := LostTenant{TenantID: tenant}
	streamKey, headKey := s.AuditKeys(tenant)
	h, err := s.readHead(ctx, headKey)
	if err != nil {
		return lt, err
	}
	var head int64
	if seq, _, ok := strings.Cut(h, " "); ok {
		head, _ = strconv.ParseInt(seq, 10, 64)
	}
	xi, err := s.rdb.XInfoStream(ctx, streamKey).Result()
	switch {
	case err != nil && strings.Contains(err.Error(), "no such key"):
		// The stream went: everything up to the head, or, with no head
		// either, everything, up to where nobody knows.
		lt.Lost = []SeqRange{{From: 1, To: head}}
		return lt, nil
	case err != nil:
		return lt, err
	}
	last := streamSeq(xi.LastGeneratedID)
	firstAdded := last - xi.EntriesAdded + 1 // the first record this stream was given
	if xi.EntriesAdded == 0 {
		// A server that does not count (before Redis 7.0): the first
		// record left, which cannot tell an eviction from a trim.
		firstAdded = streamSeq(xi.FirstEntry.ID)
	}
	if firstAdded > 1 {
		lt.Lost = append(lt.Lost, SeqRange{From: 1, To: firstAdded - 1})
	}
	if head > last {
		lt.Lost = append(lt.Lost, SeqRange{From: last + 1, To: head})
	}
	lt.HeadLost = h == "" && last > 0
	return lt, nil
}

// streamSeq is the sequence number of a stream entry id, "<seq>-1".
func streamSeq(id string) int64 {
	seq, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(seq, 10, 64)
	return n
}

// Errors AckEvictions returns.
var (
	// ErrNoOperator: an acknowledgement that names nobody.
	ErrNoOperator = errors.New("idem: an acknowledgement must name its operator")
	// ErrStillEvicting: a master's policy may still evict; restore
	// noeviction first, or the acknowledgement would cover losses still
	// to come.
	ErrStillEvicting = errors.New("idem: a master's maxmemory-policy may still evict: set it to noeviction before acknowledging")
)

// AckEvictions acknowledges what Evictions reports, as operator (audited
// nowhere else: the marker keeps the last acknowledgement), at now: once
// every master's policy is noeviction, it resets each master's statistics
// (CONFIG RESETSTAT, so evicted_keys counts from zero), clears the
// marker's eviction and named tenants, counts the acknowledgement, and
// marks each tenant the report names as one that lost records until
// now+window: there a write whose key has no record asks its tool's
// receipt before it runs (guard.Entry.MayBeLost), since it may be one
// whose record went. Choose window as long as a replay of a write may
// come (Options.TTL, by default: after it, records expire anyway). When
// the stores did not hear every evicted key (EvictionReport.Unheard),
// every tenant is marked so. The stores accept the server again at their
// next check. It returns the report it acknowledged.
func (s *Store) AckEvictions(ctx context.Context, operator string, window time.Duration, now time.Time) (*EvictionReport, error) {
	if operator == "" {
		return nil, ErrNoOperator
	}
	r, err := s.Evictions(ctx)
	if err != nil {
		return nil, err
	}
	for _, sv := range r.Servers {
		if sv.Policy != "" && sv.Policy != "noeviction" {
			return nil, fmt.Errorf("%w (%s has %s)", ErrStillEvicting, sv.Addr, sv.Policy)
		}
	}
	err = redisconn.ForEachMaster(ctx, s.rdb, func(ctx context.Context, c *redis.Client) error {
		return c.ConfigResetStat(ctx).Err()
	})
	if err != nil {
		return nil, fmt.Errorf("idem: resetting the servers' evicted-key counts: %w", err)
	}
	marker := s.prefix + markerName
	old, err := s.rdb.HGetAll(ctx, marker).Result()
	if err != nil {
		return nil, err
	}
	until := strconv.FormatInt(now.Add(window).UnixMilli(), 10)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, marker, markEvicted)
		for f, v := range old {
			if ms, _ := strconv.ParseInt(v, 10, 64); strings.HasPrefix(f, markGap) && ms <= now.UnixMilli() {
				p.HDel(ctx, marker, f) // a window that ended
			}
		}
		for _, t := range r.Tenants {
			f := enc.EncodeToString([]byte(t.TenantID))
			p.HDel(ctx, marker, markTenant+f)
			if len(t.Lost) > 0 || t.Named {
				p.HSet(ctx, marker, markGap+f, until)
			}
		}
		if r.Unheard {
			p.HSet(ctx, marker, markGap+markEvery, until)
		}
		for f := range old {
			if strings.HasPrefix(f, markHeard) || strings.HasPrefix(f, markTenant) {
				p.HDel(ctx, marker, f)
			}
		}
		p.HIncrBy(ctx, marker, markAcks, 1)
		p.HSet(ctx, marker, markAcked, strconv.FormatInt(now.UnixMilli(), 10)+" "+operator)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.AckedAt, r.AckedBy = now, operator
	return r, nil
}
