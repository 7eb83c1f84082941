package pgstore

import (
	"context"
	"strconv"
	"time"
)

// sweepBatch bounds the rows one statement of a sweep deletes, so that a
// sweep never holds many row locks or one long transaction.
const sweepBatch = 5000

// Sweep deletes what the store's retention (Options.TTL) let go by now:
// call bindings, idempotency records (tombstones too), operation indexes,
// commit answers, spent grants and budget tokens whose time ran out, run
// counters idle that long, and tenant budget periods a period after they
// ended. Lookups already ignore them: a sweep only frees space. It deletes
// in batches, each its own transaction, and returns how many rows went.
// Audit logs are never swept (docs/operations.md says how to trim them).
// The store sweeps on its own every Options.SweepEvery; toolctl retention
// runs one by hand.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int64, error) {
	nowMS := now.UnixMilli()
	var total int64
	for _, t := range []struct{ table, key, cond string }{
		{"bindings", "tenant, subject, call_id", "until_ms <= $1"},
		{"records", "tenant, subject, key", "until_ms <= $1"},
		{"ops", "tenant, subject, op", "until_ms <= $1"},
		{"commits", "tenant, subject, token", "until_ms <= $1"},
		{"grants", "tenant, subject, grant_id", "until_ms <= $1"},
		{"budget_charges", "tenant, token", "until_ms <= $1"},
		{"budget_runs", "tenant, scope, tool", "until_ms <= $1"},
		{"budget_periods", "tenant, start_ms", "end_ms + (end_ms - start_ms) <= $1"},
	} {
		q := "DELETE FROM " + s.schema + "." + t.table + " WHERE (" + t.key + ") IN (SELECT " + t.key + " FROM " +
			s.schema + "." + t.table + " WHERE " + t.cond + " LIMIT " + strconv.Itoa(sweepBatch) + " FOR UPDATE SKIP LOCKED)"
		for {
			tag, err := s.pool.Exec(ctx, q, nowMS)
			if err != nil {
				return total, errorf("sweeping %s: %w", t.table, err)
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < sweepBatch {
				break
			}
		}
	}
	return total, nil
}

// maybeSweep starts a sweep in the background when one is due, at most
// one at a time; a sweep that fails is tried again at the next due time.
func (s *Store) maybeSweep() {
	if s.sweepEvery < 0 {
		return
	}
	now := time.Now()
	next := s.nextSweep.Load()
	if now.UnixMilli() < next || !s.nextSweep.CompareAndSwap(next, now.Add(s.sweepEvery).UnixMilli()) {
		return
	}
	if !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), s.sweepEvery/2+time.Minute)
		defer cancel()
		_, _ = s.Sweep(ctx, now)
	}()
}
