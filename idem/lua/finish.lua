-- finish: a dispatch that reserved nothing (a failed check, or a read that
-- ran). The audit record is appended before anything is stored.
local pre, bound = precheck()
if pre then return pre end
audit(CODE, 'fresh', SIDE)
if not bound then bind(CODE, DATA, MSG) elseif TERMINAL[CODE] then
  redis.call('HSET', K[1], 'code', CODE, 'data', DATA, 'msg', MSG)
end
if CODE == 'OK' and HAS_KEY then
  redis.call('HSET', K[2], 'fp', FP, 'state', 'C', 'data', DATA, 'msg', MSG, 'op', OP, 'tool', TOOL,
    'key', KEY, 'call', CALL)
  redis.call('PEXPIRE', K[2], TTL)
  index('k' .. K[2])
elseif TERMINAL[CODE] and HAS_CALL then
  index('c' .. K[1])
end
return answer(CODE, 'fresh', DATA, MSG, RETRY, '')
