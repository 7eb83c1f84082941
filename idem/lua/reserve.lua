-- reserve: checks 1 and 2 for a write about to execute, then the reservation.
local pre, bound = precheck()
if pre then return pre end
-- Bind the call id and link it to the record it reserves: a retry of this
-- call id is answered from this operation whatever key or operation id it
-- carries.
if HAS_CALL then
  if bound then
    redis.call('HSET', KEYS[1], 'key', KEYS[2])
  else
    redis.call('HSET', KEYS[1], 'fp', FP, 'key', KEYS[2])
    redis.call('PEXPIRE', KEYS[1], TTL)
  end
end
local token = ARGV[16]
local lease = tonumber(ARGV[20])
redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'P', 'op', OP, 'lease', NOW + lease, 'token', token,
  'tool', ARGV[14], 'key', ARGV[18], 'call', ARGV[17])
redis.call('PEXPIRE', KEYS[2], TTL)
index('k' .. KEYS[2])
return {'T', token}
