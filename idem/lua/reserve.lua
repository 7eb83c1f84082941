-- reserve: checks 1 and 2 for a write about to execute, then the reservation.
local pre, bound = precheck()
if pre then return pre end
if not bound then bind('') end
local token = ARGV[16]
local lease = tonumber(ARGV[19])
redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'P', 'op', OP, 'lease', NOW + lease, 'token', token,
  'tool', ARGV[14], 'key', ARGV[18], 'call', ARGV[17])
redis.call('PEXPIRE', KEYS[2], TTL)
redis.call('SET', KEYS[3], 'k' .. KEYS[2], 'PX', TTL)
return {'T', token}
