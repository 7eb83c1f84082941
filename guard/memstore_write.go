package guard

import (
	"context"
	"time"
)

// Finish implements Store (rule 10).
func (s *MemStore) Finish(ctx context.Context, e *Entry) (*Result, error) {
	if err := ready(ctx, e.Code); err != nil {
		return nil, err
	}
	t := s.begin(e, e.CallID)
	defer t.end()
	answer, decided, bound := t.precheck()
	if decided {
		return answer.result(), nil
	}
	t.audit(e.Code, DeliveryFresh, e.SideEffect)
	data := string(e.Data)
	if !bound {
		t.bind(e.Code, data, e.Message)
	} else if e.Code.Terminal() {
		b := t.binding()
		b.code, b.data, b.msg = e.Code, data, e.Message
	}
	switch {
	case e.Code == CodeOK && t.hasKey:
		r := t.setRecord(t.key, false)
		r.fp, r.state, r.data, r.msg = e.Fingerprint, committed, data, e.Message
		r.op, r.tool, r.key, r.call = e.OperationID, e.Tool, e.IdempotencyKey, e.CallID
		t.indexRecord()
	case e.Code.Terminal() && t.hasCall:
		t.indexCall()
	case !e.Code.Terminal():
		t.never()
	}
	return reply{code: e.Code, delivery: DeliveryFresh, data: data, msg: e.Message, retryMS: ms(e.RetryAfter)}.result(), nil
}

// Reserve implements Store (rules 11 and 12).
func (s *MemStore) Reserve(ctx context.Context, e *Entry, lease time.Duration) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.Token == "" {
		return nil, errNoToken
	}
	t := s.begin(e, e.CallID)
	defer t.end()
	own := t.record(t.key)
	if own != nil && own.token == e.Token {
		if own.state == reserved {
			return nil, nil // a copy of this reservation: it stands
		}
		// A late copy of a reservation already committed or released.
		return reply{code: CodeUnavailable, delivery: DeliveryFresh}.result(), nil
	}
	answer, decided, bound := t.precheck()
	if decided {
		return answer.result(), nil
	}
	if !t.spendable() {
		return t.refuse(bound, CodeApprovalInvalid, GrantUsedMessage), nil
	}
	if e.Charge != nil {
		// The charge (rule 24), after every check that answers from the
		// store: a replay, a conflict or a refused grant takes none.
		c := *e.Charge
		c.Token = e.Token
		v, err := s.take(&c, t.now)
		if err != nil {
			return nil, err
		}
		if v != BudgetTaken {
			return t.refuse(bound, CodeBudgetExhausted, c.Refusal(v)), nil
		}
	}
	t.spend()
	// Link the call id to the record it reserves: a retry of this call id
	// is answered from this operation whatever key or operation id it
	// carries.
	if t.hasCall {
		if bound {
			b := t.binding()
			b.linked, b.link = true, e.IdempotencyKey
		} else {
			b := t.setBinding()
			b.fp, b.linked, b.link = e.Fingerprint, true, e.IdempotencyKey
		}
	}
	r := t.setRecord(t.key, true)
	r.fp, r.state, r.op, r.leaseMS, r.token = e.Fingerprint, reserved, e.OperationID, t.now+ms(lease), e.Token
	r.tool, r.key, r.call = e.Tool, e.IdempotencyKey, e.CallID
	t.indexRecord()
	e.Reserved = true
	return nil, nil
}

// Commit implements Store (rules 13 and 14).
func (s *MemStore) Commit(ctx context.Context, e *Entry) (*Result, error) {
	if err := ready(ctx, e.Code); err != nil {
		return nil, err
	}
	if e.Token == "" {
		return nil, errNoToken
	}
	t := s.begin(e, e.CallID)
	defer t.end()
	memo := scope{e.TenantID, e.SubjectID, e.Token}
	if done := s.commits[memo]; done != nil && !expired(done.until, t.now) {
		return done.v.result(), nil // a retry of this very commit
	}
	answer := reply{code: e.Code, delivery: DeliveryFresh, data: string(e.Data), msg: e.Message, retryMS: ms(e.RetryAfter)}
	side := e.SideEffect
	var store byte // what to write once audited: committed, unknown, released or nothing
	k := t.record(t.key)
	mine := k != nil && k.state == reserved && k.token == e.Token // the fresh path: this token's reservation stands
	switch {
	case k != nil && k.fp == e.Fingerprint && k.state == committed:
		// Settled meanwhile from a receipt: the stored result stands, and
		// the side effect was already audited by the status query.
		answer.code, answer.delivery, answer.data, answer.msg = CodeOK, DeliveryLocalReplay, k.data, k.msg
		side = SideEffectNone
	case k.live() && k.fp != e.Fingerprint:
		// The key now belongs to another intent: never overwrite it. Our
		// outcome is still reported and audited.
		if answer.code == CodeOK {
			answer.code, answer.data, answer.msg = CodeOutcomeUnknown, "", ""
		}
	case e.Code == CodeOK:
		store = committed
	case e.Code == CodeOutcomeUnknown:
		store = unknown
	case k != nil && k.token == e.Token:
		store = released // not started: free the key for corrected or later input
	}
	if answer.code == CodeOutcomeUnknown {
		answer.op = e.OperationID
	}
	t.audit(answer.code, answer.delivery, side)
	switch store {
	case committed, unknown:
		r := t.setRecord(t.key, false)
		r.fp, r.state, r.op, r.tool, r.key, r.call = e.Fingerprint, store, e.OperationID, e.Tool, e.IdempotencyKey, e.CallID
		if store == committed {
			r.data, r.msg = answer.data, answer.msg
		}
	case released:
		t.release(t.key)
		t.giveBack()
	}
	t.settleCharge(store == committed)
	// The call binding: bound to this intent unless it is another's (a
	// reservation answered CALL_ID_CONFLICT, its reply lost, then
	// released). On the fresh path it is what Reserve wrote, this intent
	// linked to the record, and stays so when the record holds the
	// outcome. A committed record holds the result: the binding links it,
	// and a retry of the call id, or a status query naming the call id,
	// reads it there, where the record answers only for the operation it
	// ran under.
	if b := t.binding(); t.hasCall && !(mine && (store == committed || store == unknown)) && (b == nil || b.fp == e.Fingerprint) {
		b = t.setBinding()
		b.fp = e.Fingerprint
		if mine || store == committed {
			b.linked, b.link = true, e.IdempotencyKey
		}
		if store != committed && answer.code.Terminal() {
			b.code, b.data, b.msg = answer.code, answer.data, answer.msg
		}
	}
	s.commits[memo] = &expiring[reply]{answer, s.expiry(t.now)}
	return answer.result(), nil
}

// ready refuses, before anything changes, a call whose context is done or
// whose entry carries no valid code.
func ready(ctx context.Context, code Code) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !code.Valid() {
		return errBadCode
	}
	return nil
}

// grant names the entry's spent-grant marker (rule 22).
func (t *memStep) grant() scope { return scope{t.e.TenantID, t.e.SubjectID, t.e.GrantID} }

// spendable reports whether the entry's grant may be spent on its
// operation (rule 22): false when another operation spent it, true when it
// is unspent or this operation's, or the entry has no grant.
func (t *memStep) spendable() bool {
	e := t.e
	if e.GrantID == "" {
		return true
	}
	g := t.s.grants[t.grant()]
	return g == nil || expired(g.until, t.now) || g.v == e.IdempotencyKey
}

// spend spends the entry's grant, if it has one, on its operation (rule
// 22).
func (t *memStep) spend() {
	e := t.e
	if e.GrantID != "" {
		t.s.grants[t.grant()] = &expiring[string]{e.IdempotencyKey, e.GrantExpiresAt.Add(GrantSkew).UnixMilli()}
	}
}

// refuse answers a reservation its grant (rule 22) or its budget (rule 24)
// refused: audited, a new call id bound to the fingerprint alone (the code
// is not terminal), the operation marked as one of which nothing ran.
func (t *memStep) refuse(bound bool, code Code, msg string) *Result {
	t.audit(code, DeliveryFresh, SideEffectNone)
	if !bound {
		t.bind(code, "", msg)
	}
	t.never()
	return reply{code: code, delivery: DeliveryFresh, msg: msg}.result()
}

// giveBack returns a grant spent on an operation that did not start (rule
// 22): the approval paid for nothing.
func (t *memStep) giveBack() {
	if t.e.GrantID == "" {
		return
	}
	if g := t.s.grants[t.grant()]; g != nil && g.v == t.e.IdempotencyKey {
		delete(t.s.grants, t.grant())
	}
}
