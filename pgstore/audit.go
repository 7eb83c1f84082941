package pgstore

import (
	"context"

	"github.com/toolguard/toolguard/guard"
)

// Audit implements guard.AuditLog (rule 17): up to limit records of
// the tenant with sequence numbers above after, in order (none when limit
// is not positive), and the tenant's head ({0, ""} before its first
// record), read in one statement, so the head and the records are of one
// snapshot.
func (s *Store) Audit(ctx context.Context, tenantID string, after int64, limit int) ([]guard.AuditRecord, guard.AuditHead, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var head guard.AuditHead
	out := []guard.AuditRecord{}
	limit = max(limit, 0)
	rows, err := s.pool.Query(ctx, `SELECT coalesce(h.seq, 0), coalesce(h.hash, ''), a.seq, a.body, a.code, a.delivery, a.side, a.prev, a.hash
		FROM (SELECT 1) one
		LEFT JOIN `+s.schema+`.heads h ON h.tenant = $1
		LEFT JOIN LATERAL (SELECT * FROM `+s.schema+`.audit WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3) a ON true
		ORDER BY a.seq`, b(tenantID), after, limit)
	if err != nil {
		return nil, head, errorf("audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			seq                              *int64
			body                             []byte
			code, delivery, side, prev, hash *string
		)
		if err := rows.Scan(&head.Seq, &head.Hash, &seq, &body, &code, &delivery, &side, &prev, &hash); err != nil {
			return nil, head, errorf("audit: %w", err)
		}
		if seq == nil {
			continue
		}
		c, ok := guard.ParseCode(*code)
		if !ok {
			return nil, head, errorf("audit: tenant %q record %d has code %q", tenantID, *seq, *code)
		}
		out = append(out, guard.AuditRecord{Seq: *seq, Body: body, Code: c, Delivery: guard.Delivery(*delivery),
			SideEffect: guard.SideEffect(*side), PrevHash: *prev, Hash: *hash})
	}
	if err := rows.Err(); err != nil {
		return nil, head, errorf("audit: %w", err)
	}
	return out, head, nil
}

// AuditTenants returns the tenants that have an audit log, sorted by
// their bytes: for operators (toolctl gaps), not for the dispatch path.
func (s *Store) AuditTenants(ctx context.Context) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT tenant FROM "+s.schema+".heads ORDER BY tenant")
	if err != nil {
		return nil, errorf("tenants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t []byte
		if err := rows.Scan(&t); err != nil {
			return nil, errorf("tenants: %w", err)
		}
		out = append(out, string(t))
	}
	return out, rows.Err()
}
