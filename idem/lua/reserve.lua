-- reserve: checks 1 and 2 for a write about to execute, the grant and the
-- budget, then the reservation. Idempotent per token: a copy of this
-- reservation sent again (a client retry after a lost reply) finds its own
-- token and changes nothing (its charge was taken once); after the token's
-- release it is refused, so the key stays free.
local own, ownn = readkey(K[2])
if own[R.token] == TOKEN then
  -- Standing already (HELD): the store tells the guard, whose holder may
  -- have run the write (a durable step run again: guard.Call.Step). A
  -- reservation made as MAYBELOST answers so again (HELDLOST, below).
  if own[R.state] == 'P' then
    if own[R.done] == 'L' then return HELDLOST end
    return HELD
  end
  return answer('UNAVAILABLE', 'fresh')
end
local pre, c, cn = precheck(own, ownn)
if pre then return pre end
-- A grant pays for one execution: spent on another operation's record, it
-- approves nothing here; otherwise it is this operation's from now on (K[7]
-- names the record it paid for). The message is guard.GrantUsedMessage.
if K[7] then
  local spent = rcall('GET', K[7])
  if spent and spent ~= link() then
    audit('APPROVAL_INVALID', 'fresh', 'no')
    if not c[B.fp] then bind('APPROVAL_INVALID') end
    never()
    return answer('APPROVAL_INVALID', 'fresh', '',
      'The approval was already used for another execution: one approval pays for one execution. Ask a human to approve this call.')
  end
end
-- The budget charge, after every check that answers from the store (a
-- replay, a conflict, IN_PROGRESS, an unknown outcome, a spent grant take
-- none), before anything is reserved or spent: {'B', '1'} (the run's bound
-- has no room) or {'B', '2'} (the tenant's), and the store words the
-- answer (guard.BudgetCharge.Refusal).
if CHARGE ~= '' then
  local v = charge()
  if v == 1 or v == 2 then
    audit('BUDGET_EXHAUSTED', 'fresh', 'no')
    if not c[B.fp] then bind('BUDGET_EXHAUSTED') end
    never()
    return PACK({'B', format('%d', v)}, 2)
  elseif v == 3 then
    -- A late copy of a reservation released by its token, whose record's
    -- tombstone is gone: it reserves nothing.
    return answer('UNAVAILABLE', 'fresh')
  end
end
if K[7] then rcall('SET', K[7], link(), 'PX', GRANT_MS) end
-- Bind the call id and link it to the record it reserves: a retry of this
-- call id is answered from this operation whatever key or operation id it
-- carries.
if HAS_CALL then
  if c[B.fp] then
    c[B.key] = link()
    save(K[1], c, max(cn, B.key))
  else
    save(K[1], {FP, false, false, false, link()}, B.key, TTL)
  end
end
-- A released record's tombstone is replaced.
-- The record is {FP, 'P', '', '', OP, NOW + LEASE, TOKEN, TOOL, KEY, CALL},
-- packed by the store (RESERVATION). In a tenant that lost records, a key
-- with no record at all may be one of them: the answer is MAYBELOST, and
-- the guard asks the receipt before the write runs. The record then says
-- so in its done field ('L', packed: MAYBELOST's bytes), so that a copy
-- of this reservation answers the same.
if GAP ~= '' and not own[R.state] then
  rcall('SET', K[2], RESERVATION .. MAYBELOST, 'PX', TTL)
  index('k')
  return MAYBELOST
end
rcall('SET', K[2], RESERVATION, 'PX', TTL)
index('k')
return RESERVED
