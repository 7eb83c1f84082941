-- reserve: checks 1 and 2 for a write about to execute, then the reservation.
-- Idempotent per token: a copy of this reservation sent again (a client
-- retry after a lost reply) finds its own token and changes nothing; after
-- the token's release it is refused, so the key stays free.
-- The fence (idem/evicted.go): on a server whose policy may evict, a key
-- this reservation reads or writes may go at any time, so no write runs and
-- no replay is answered. It is read here, in the script, so a CONFIG SET
-- that came before this call is seen by it: {'E', policy}, packed.
if FENCE ~= '' then
  local info = rcall('INFO', 'memory')
  if not find(info, 'maxmemory_policy:noeviction', 1, true) then
    local policy = match(info, 'maxmemory_policy:([%w%-]+)')
    if policy then return PACK({'E', policy}, 2) end
  end
end
local own, ownn = readkey(K[2])
if own[R.token] == TOKEN then
  -- Standing already (HELD): the store tells the guard, whose holder may
  -- have run the write (a durable step run again: guard.Call.Step).
  if own[R.state] == 'P' then return HELD end
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
  rcall('SET', K[7], link(), 'PX', GRANT_MS)
end
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
-- packed by the store (RESERVATION).
rcall('SET', K[2], RESERVATION, 'PX', TTL)
index('k')
return RESERVED
