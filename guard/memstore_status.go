package guard

import (
	"context"
)

// target is the operation a status query names, as found: a stored result
// (of a call binding or a committed record), a record whose outcome is
// open, or a record the store may have lost.
type target struct {
	at     scope   // the idempotency record's name
	rec    *record // nil for a call binding's result and a lost record
	stored *reply  // the stored result, when there is one
	lost   bool
}

// find reads the operation a status query names (rule 15): the record or
// binding its operation id is indexed to; else the binding of the call
// whose id is the operation id; else (the index alone lost) the record of
// the query's key. A record answers only for the operation it ran under.
// ok is false when nothing is stored for the operation; known then says
// that the store knows nothing of it ran (its call is bound but holds no
// live reservation, or the record found is another operation's).
func (t *memStep) find() (tg target, ok, known bool) {
	e := t.e
	var r ref
	if e.OperationID != "" { // the empty id names no operation
		r, ok = t.indexed()
	}
	if ok && r.never {
		r, ok, known = ref{}, false, true
	}
	if !ok && e.OperationID != "" {
		if b := t.s.calls[t.op]; b != nil && !expired(b.until, t.now) {
			switch {
			case b.code != 0:
				stored := b.replay()
				return target{stored: &stored}, true, false
			case b.linked:
				r, ok = ref{id: b.link}, true
			default:
				return tg, false, true
			}
			known = true
		}
	}
	if !ok && t.hasKey && !known {
		r, ok = ref{id: e.IdempotencyKey}, true
	}
	if !ok {
		return tg, false, known
	}
	at := scope{e.TenantID, e.SubjectID, r.id}
	if r.call {
		b := t.s.calls[at]
		if b == nil || expired(b.until, t.now) || b.code == 0 {
			return tg, false, false
		}
		stored := b.replay()
		return target{at: at, stored: &stored}, true, false
	}
	rec := t.record(at)
	if !rec.live() {
		return tg, false, known
	}
	if rec.op != e.OperationID {
		return tg, false, true // the key is another operation's
	}
	tg = target{at: at, rec: rec}
	if rec.state == committed {
		tg.stored = &reply{code: CodeOK, delivery: DeliveryLocalReplay, data: rec.data, msg: rec.msg}
	}
	return tg, true, false
}

// settled answers a status query from what is stored, audited: a stored
// result (replayed), or NOT_FOUND when nothing is stored and the query does
// not name a tool and a key, or the store knows nothing of it ran.
// Otherwise it returns the target, a lost one when nothing is stored (rule
// 15).
func (t *memStep) settled() (tg target, answer reply, decided bool) {
	tg, ok, known := t.find()
	switch {
	case !ok && !known && t.hasKey && t.e.Tool != "":
		return target{lost: true}, answer, false
	case !ok:
		answer = reply{code: CodeNotFound, delivery: DeliveryFresh}
	case tg.stored != nil:
		answer = *tg.stored
	default:
		return tg, answer, false
	}
	t.audit(answer.code, answer.delivery, SideEffectNone)
	return tg, answer, true
}

// Status implements Store (rule 15).
func (s *MemStore) Status(ctx context.Context, q *Entry) (*Result, *Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	t := s.begin(q, "")
	defer t.end()
	tg, answer, decided := t.settled()
	if decided {
		return answer.result(), nil, nil
	}
	if tg.lost {
		return nil, &Pending{Tool: q.Tool, IdempotencyKey: q.IdempotencyKey, Fingerprint: q.Fingerprint,
			OperationID: q.OperationID, Lost: true}, nil
	}
	r := tg.rec
	if r.state == reserved && r.leaseMS > t.now {
		t.audit(CodeInProgress, DeliveryFresh, SideEffectNone)
		return reply{code: CodeInProgress, delivery: DeliveryFresh, retryMS: r.leaseMS - t.now}.result(), nil, nil
	}
	if r.state == reserved {
		r.state = unknown // its holder's lease expired: never run blind again
	}
	return nil, &Pending{Tool: r.tool, IdempotencyKey: r.key, Fingerprint: r.fp, CallID: r.call, OperationID: r.op}, nil
}

// notTakenPlace is the message of a NOT_FOUND from an absent receipt.
const notTakenPlace = "The operation did not take place: nothing was executed. It may be run again."

// Settle implements Store (rule 16). It finds the operation again
// rather than trusting p: what is stored now decides, p only names the
// original call, whose binding takes a found result.
func (s *MemStore) Settle(ctx context.Context, q *Entry, p *Pending, rc Receipt, data []byte) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := s.begin(q, p.CallID)
	defer t.end()
	tg, answer, decided := t.settled()
	if decided {
		return answer.result(), nil
	}
	r := tg.rec
	switch {
	case rc == ReceiptFound:
		answer = reply{code: CodeOK, delivery: DeliveryReceiptReconciled, data: string(data)}
		t.audit(answer.code, answer.delivery, SideEffectYes)
		if tg.lost {
			// Nothing is stored for a lost record: its fingerprint is
			// unknown. A retry runs under the same downstream key and
			// gets the same receipt.
			return answer.result(), nil
		}
		r.state, r.data, r.msg = committed, answer.data, ""
		r.until = s.expiry(t.now)
		s.keep(q.TenantID, r.token) // it ran: its charge stays (rule 25)
		if t.hasCall {
			// The record holds the result; the original call's binding
			// links it, so that its call id answers only for the
			// operation the record ran under.
			b := t.setBinding()
			b.fp, b.code, b.data, b.msg = r.fp, 0, "", ""
			b.linked, b.link = true, tg.at.id
		}
		return answer.result(), nil
	case rc == ReceiptAbsent && (tg.lost || r.leaseMS <= t.now):
		// The lease is over and the downstream system has no operation
		// under the key: it did not take place. A re-execution reuses
		// the key downstream, so a late first attempt is deduplicated.
		t.audit(CodeNotFound, DeliveryFresh, SideEffectNone)
		if !tg.lost {
			s.giveBack(q.TenantID, r.token, t.now) // it did not run: its charge goes back (rule 25)
			t.release(tg.at)
		}
		return reply{code: CodeNotFound, delivery: DeliveryFresh, msg: notTakenPlace}.result(), nil
	}
	t.audit(CodeOutcomeUnknown, DeliveryFresh, SideEffectNone)
	op := q.OperationID
	if r != nil {
		op = r.op
	}
	return reply{code: CodeOutcomeUnknown, delivery: DeliveryFresh, op: op}.result(), nil
}

// release frees a reserved key (rule 13, 16). Released by its own token
// (a commit), the record becomes a tombstone of that token, which refuses
// a late copy of the reservation; released without one (a status query),
// it is deleted. An index entry of the step's operation naming it then
// says that nothing of the operation ran.
func (t *memStep) release(at scope) {
	delete(t.s.records, at)
	if t.e.Token != "" {
		t.s.records[at] = &record{state: released, token: t.e.Token, until: t.s.expiry(t.now)}
	}
	if r, ok := t.indexed(); ok && !r.call && !r.never && r.id == at.id {
		t.s.index[t.op] = ref{never: true, until: r.until}
	}
}
