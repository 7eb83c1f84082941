-- commit: the outcome of a reserved write, with its audit record.
local code, delivery, data, msg, op = ARGV[5], 'fresh', ARGV[6], ARGV[7], ''
local token = ARGV[16]
local k = redis.call('HMGET', KEYS[2], 'fp', 'state', 'token', 'data', 'msg', 'done')
local side = ARGV[9]
-- A retry of this very commit (its reply was lost after it was applied):
-- answer again, change nothing, audit nothing more.
if k[6] == token or (HAS_CALL and redis.call('HGET', KEYS[1], 'done') == token) then
  if k[1] == FP and k[2] == 'C' then return answer('OK', 'fresh', k[4], k[5]) end
  if code == 'OUTCOME_UNKNOWN' then op = OP end
  return answer(code, 'fresh', data, msg, ARGV[8], op)
end
if k[1] == FP and k[2] == 'C' then
  -- settled meanwhile from a receipt: the stored result stands, and the
  -- side effect was already audited as 'yes' by the status query.
  code, delivery, data, msg, side = 'OK', 'local_replay', k[4], k[5], 'no'
elseif k[1] and k[1] ~= FP then
  -- the key now belongs to another intent (ours was freed and reused):
  -- never overwrite it; our outcome is still reported and audited.
  if code == 'OK' then code = 'OUTCOME_UNKNOWN' end
elseif code == 'OK' then
  redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'C', 'data', data, 'msg', msg, 'op', OP, 'tool', ARGV[14],
    'key', ARGV[18], 'call', ARGV[17], 'done', token)
  redis.call('PEXPIRE', KEYS[2], TTL)
elseif code == 'OUTCOME_UNKNOWN' then
  redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'U', 'op', OP, 'tool', ARGV[14], 'key', ARGV[18],
    'call', ARGV[17], 'done', token)
  redis.call('PEXPIRE', KEYS[2], TTL)
elseif k[3] == token then
  -- not started: free the key so corrected or later input may use it.
  redis.call('DEL', KEYS[2])
  if redis.call('GET', KEYS[3]) == 'k' .. KEYS[2] then redis.call('DEL', KEYS[3]) end
end
if code == 'OUTCOME_UNKNOWN' then op = OP end
if HAS_CALL then
  if TERMINAL[code] then
    redis.call('HSET', KEYS[1], 'fp', FP, 'code', code, 'data', data, 'msg', msg, 'done', token)
  else
    redis.call('HSET', KEYS[1], 'fp', FP, 'done', token)
  end
  redis.call('PEXPIRE', KEYS[1], TTL)
end
audit(code, delivery, side)
return answer(code, delivery, data, msg, ARGV[8], op)
