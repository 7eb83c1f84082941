package guard

// precheck applies checks 1 and 2 of the contract (rules 6 to 9). When they
// decide the answer, it is audited and returned with decided set;
// otherwise nothing changed, and bound says whether the call id was
// already bound (to this fingerprint).
func (t *memStep) precheck() (answer reply, decided, bound bool) {
	e := t.e
	var b *binding
	if t.hasCall {
		b = t.binding()
	}
	if b != nil {
		bound = true
		if b.fp != e.Fingerprint {
			t.audit(CodeCallIDConflict, DeliveryFresh, SideEffectNone)
			return reply{code: CodeCallIDConflict, delivery: DeliveryFresh}, true, bound
		}
		if b.code != 0 {
			t.audit(b.code, DeliveryLocalReplay, SideEffectNone)
			return b.replay(), true, bound
		}
	}
	// The record to check: the one this call id already reserved (its own
	// operation, whatever key the retry carries), else the key's.
	var (
		at  scope
		rec *record
	)
	if b != nil && b.linked {
		at = scope{e.TenantID, e.SubjectID, b.link}
		rec = t.record(at)
	}
	if !rec.live() && t.hasKey {
		at = t.key
		rec = t.record(at)
	}
	if !rec.live() {
		return reply{}, false, bound
	}
	answer = t.keycheck(rec)
	t.audit(answer.code, answer.delivery, SideEffectNone)
	if rec.state == reserved && answer.code == CodeOutcomeUnknown {
		rec.state = unknown // its holder's lease expired: never run blind again
	}
	terminal := answer.code.Terminal()
	if !bound {
		t.bind(answer.code, answer.data, answer.msg)
	} else if terminal && !(b.linked && at.id == b.link) {
		// (an answer from the record the binding links is read there again)
		b.code, b.data, b.msg = answer.code, answer.data, answer.msg
	}
	if terminal && t.hasCall {
		t.indexCall()
	}
	return answer, true, bound
}

// keycheck answers from a live idempotency record (rule 7): a conflict, a
// stored result, in progress, or unknown.
func (t *memStep) keycheck(r *record) reply {
	switch {
	case r.fp != t.e.Fingerprint:
		return reply{code: CodeIdempotencyConflict, delivery: DeliveryFresh}
	case r.state == committed:
		return reply{code: CodeOK, delivery: DeliveryLocalReplay, data: r.data, msg: r.msg}
	case r.state == reserved && r.leaseMS > t.now:
		return reply{code: CodeInProgress, delivery: DeliveryFresh, retryMS: r.leaseMS - t.now}
	}
	return reply{code: CodeOutcomeUnknown, delivery: DeliveryFresh, op: r.op}
}

// bind binds a new call id to the fingerprint, with the result if it is
// terminal (rule 9).
func (t *memStep) bind(code Code, data, msg string) {
	if !t.hasCall {
		return
	}
	b := t.setBinding()
	b.fp = t.e.Fingerprint
	if code.Terminal() {
		b.code, b.data, b.msg = code, data, msg
	}
}

// indexCall points the operation id at the call binding, unless the index
// already names something (rule 4).
func (t *memStep) indexCall() {
	if cur, ok := t.indexed(); !ok || cur.never {
		t.s.index[t.op] = ref{call: true, id: t.callID, until: t.s.expiry(t.now)}
	}
}

// never marks the step's operation as one of which nothing ran, unless the
// index names something already (rule 4). An operation named after its
// call needs no mark: its binding says as much.
func (t *memStep) never() {
	if t.e.OperationID == t.callID || !t.hasKey {
		return
	}
	if _, ok := t.indexed(); !ok {
		t.s.index[t.op] = ref{never: true, until: t.s.expiry(t.now)}
	}
}

// indexRecord points the operation id at the step's idempotency record,
// unless it names another write record that still exists: the first
// operation keeps its id (rule 4).
func (t *memStep) indexRecord() {
	if t.e.OperationID == "" {
		return // the empty id names no operation: a call with neither id has no index
	}
	if cur, ok := t.indexed(); ok && !cur.call && !cur.never && cur.id != t.e.IdempotencyKey &&
		t.record(scope{t.e.TenantID, t.e.SubjectID, cur.id}) != nil {
		return
	}
	t.s.index[t.op] = ref{id: t.e.IdempotencyKey, until: t.s.expiry(t.now)}
}
