package guard

// step is one state change in progress, under the store's lock: the entry,
// its clock in milliseconds, and the names of what it may touch (the call
// binding, the idempotency record and the operation index entry).
type memStep struct {
	s       *MemStore
	e       *Entry
	now     int64  // e.Now in ms: every time decision uses it (rule 19)
	callID  string // the call whose binding this step reads and writes
	call    scope  // that binding
	key     scope  // the idempotency record of e.IdempotencyKey
	op      scope  // the operation index entry of e.OperationID
	hasCall bool
	hasKey  bool
}

// begin locks the store and starts a step for the entry, whose call binding
// is that of callID. The caller must call end.
func (s *MemStore) begin(e *Entry, callID string) *memStep {
	s.mu.Lock()
	now := e.Now.UnixMilli()
	s.sweep(now)
	return &memStep{
		s: s, e: e, now: now, callID: callID,
		call:    scope{e.TenantID, e.SubjectID, callID},
		key:     scope{e.TenantID, e.SubjectID, e.IdempotencyKey},
		op:      scope{e.TenantID, e.SubjectID, e.OperationID},
		hasCall: callID != "",
		hasKey:  e.IdempotencyKey != "",
	}
}

func (t *memStep) end() { t.s.mu.Unlock() }

// binding returns the call's binding, nil when there is none.
func (t *memStep) binding() *binding {
	b := t.s.calls[t.call]
	if b == nil || expired(b.until, t.now) {
		return nil
	}
	return b
}

// setBinding returns the call's binding, made if there is none, with its
// expiry renewed.
func (t *memStep) setBinding() *binding {
	b := t.binding()
	if b == nil {
		b = &binding{}
		t.s.calls[t.call] = b
	}
	b.until = t.s.expiry(t.now)
	return b
}

// record returns the idempotency record named k (a tombstone too), nil
// when there is none.
func (t *memStep) record(k scope) *record {
	r := t.s.records[k]
	if r == nil || expired(r.until, t.now) {
		return nil
	}
	return r
}

// setRecord returns the record named k for writing, with its expiry renewed:
// the one there is, or a new one in place of none or of a tombstone (which
// idem's scripts delete before writing a reservation).
func (t *memStep) setRecord(k scope, overTombstone bool) *record {
	r := t.record(k)
	if r == nil || overTombstone && r.state == released {
		r = &record{}
		t.s.records[k] = r
	}
	r.until = t.s.expiry(t.now)
	return r
}

// indexed returns the operation index entry of the step's operation.
func (t *memStep) indexed() (ref, bool) {
	r, ok := t.s.index[t.op]
	if !ok || expired(r.until, t.now) {
		return ref{}, false
	}
	return r, true
}
