-- finish: a dispatch that reserved nothing (a failed check, or a read that ran).
local pre, bound = precheck()
if pre then return pre end
local code, data, msg = ARGV[5], ARGV[6], ARGV[7]
if not bound then bind(code, data, msg) elseif TERMINAL[code] then
  redis.call('HSET', KEYS[1], 'code', code, 'data', data, 'msg', msg)
end
if code == 'OK' and HAS_KEY then
  redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'C', 'data', data, 'msg', msg, 'op', OP, 'tool', ARGV[14],
    'key', ARGV[18], 'call', ARGV[17])
  redis.call('PEXPIRE', KEYS[2], TTL)
  index('k' .. KEYS[2])
elseif TERMINAL[code] and HAS_CALL then
  index('c' .. KEYS[1])
end
audit(code, 'fresh', ARGV[9])
return answer(code, 'fresh', data, msg, ARGV[8], '')
