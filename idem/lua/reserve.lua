-- reserve: checks 1 and 2 for a write about to execute, then the reservation.
-- Idempotent per token: a copy of this reservation sent again (a client
-- retry after a lost reply) finds its own token and changes nothing; after
-- the token's release it is refused, so the key stays free.
local own = readkey(K[2])
if own[7] == TOKEN then
  if own[2] == 'P' then return {'T'} end
  return answer('UNAVAILABLE', 'fresh')
end
local pre, bound = precheck(own)
if pre then return pre end
-- Bind the call id and link it to the record it reserves: a retry of this
-- call id is answered from this operation whatever key or operation id it
-- carries.
if HAS_CALL then
  if bound then
    redis.call('HSET', K[1], 'key', K[2])
  else
    redis.call('HSET', K[1], 'fp', FP, 'key', K[2])
    redis.call('PEXPIRE', K[1], TTL)
  end
end
if own[2] == 'X' then redis.call('DEL', K[2]) end -- a released record's tombstone
redis.call('HSET', K[2], 'fp', FP, 'state', 'P', 'op', OP, 'lease', NOW + LEASE, 'token', TOKEN,
  'tool', TOOL, 'key', KEY, 'call', CALL)
redis.call('PEXPIRE', K[2], TTL)
index('k' .. K[2])
return {'T'}
