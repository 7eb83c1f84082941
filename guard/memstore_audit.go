package guard

import (
	"context"
)

// auditLog is a tenant's hash-chained audit log (rule 5).
type auditLog struct {
	recs []AuditRecord // recs[i].Seq == i+1
}

// audit appends the step's audit record with the fields decided now. Each
// method calls it before it stores anything (rule 18); in memory the append
// cannot fail, so the order only mirrors what a store that can fail must do.
func (t *memStep) audit(code Code, delivery Delivery, side SideEffect) {
	l := t.s.logs[t.e.TenantID]
	if l == nil {
		l = &auditLog{}
		t.s.logs[t.e.TenantID] = l
	}
	seq, prev := int64(len(l.recs))+1, ""
	if n := len(l.recs); n > 0 {
		prev = l.recs[n-1].Hash
	}
	body := append([]byte(nil), t.e.AuditBody...)
	r := AuditRecord{Seq: seq, Body: body, Code: code, Delivery: delivery, SideEffect: side, PrevHash: prev}
	r.Hash = r.Link()
	l.recs = append(l.recs, r)
}

// Audit implements Store (rule 17): up to limit records of the tenant with
// sequence numbers above after, in order (none when limit is not
// positive), and the tenant's head ({0, ""} before its first record).
func (s *MemStore) Audit(ctx context.Context, tenantID string, after int64, limit int) ([]AuditRecord, AuditHead, error) {
	if err := ctx.Err(); err != nil {
		return nil, AuditHead{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var head AuditHead
	l := s.logs[tenantID]
	if l == nil {
		return []AuditRecord{}, head, nil
	}
	if n := len(l.recs); n > 0 {
		head = AuditHead{Seq: l.recs[n-1].Seq, Hash: l.recs[n-1].Hash}
	}
	from := min(max(after, 0), int64(len(l.recs)))
	to := from
	if limit > 0 {
		to = min(from+int64(limit), int64(len(l.recs)))
	}
	out := make([]AuditRecord, 0, to-from)
	for _, r := range l.recs[from:to] {
		r.Body = append([]byte(nil), r.Body...) // the caller may write to it
		out = append(out, r)
	}
	return out, head, nil
}
