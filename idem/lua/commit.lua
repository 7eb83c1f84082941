-- commit: the outcome of a reserved write, with its audit record (appended
-- first: if it fails, nothing is stored).
local code, delivery, data, msg, op, side = CODE, 'fresh', DATA, MSG, '', SIDE
local k = redis.call('HMGET', KEYS[2], 'fp', 'state', 'token', 'data', 'msg', 'done')
-- A retry of this very commit (its reply was lost after it was applied):
-- answer again, change nothing, audit nothing more.
if k[6] == TOKEN or (HAS_CALL and redis.call('HGET', KEYS[1], 'done') == TOKEN) then
  if k[1] == FP and k[2] == 'C' then return answer('OK', 'fresh', k[4], k[5]) end
  if code == 'OUTCOME_UNKNOWN' then op = OP end
  return answer(code, 'fresh', data, msg, RETRY, op)
end
local store -- what to write once audited: 'C' commit, 'U' unknown, 'X' release
if k[1] == FP and k[2] == 'C' then
  -- settled meanwhile from a receipt: the stored result stands, and the
  -- side effect was already audited as 'yes' by the status query.
  code, delivery, data, msg, side = 'OK', 'local_replay', k[4], k[5], 'no'
elseif live(k) and k[1] ~= FP then
  -- the key now belongs to another intent (ours was freed and reused):
  -- never overwrite it; our outcome is still reported and audited.
  if code == 'OK' then code = 'OUTCOME_UNKNOWN' end
elseif code == 'OK' then
  store = 'C'
elseif code == 'OUTCOME_UNKNOWN' then
  store = 'U'
elseif k[3] == TOKEN then
  -- not started: free the key so corrected or later input may use it.
  store = 'X'
end
if code == 'OUTCOME_UNKNOWN' then op = OP end
audit(code, delivery, side)
if store == 'C' then
  redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'C', 'data', data, 'msg', msg, 'op', OP, 'tool', TOOL,
    'key', KEY, 'call', CALL, 'done', TOKEN)
  redis.call('PEXPIRE', KEYS[2], TTL)
elseif store == 'U' then
  redis.call('HSET', KEYS[2], 'fp', FP, 'state', 'U', 'op', OP, 'tool', TOOL, 'key', KEY,
    'call', CALL, 'done', TOKEN)
  redis.call('PEXPIRE', KEYS[2], TTL)
elseif store == 'X' then
  release(KEYS[2])
end
if HAS_CALL then
  if TERMINAL[code] then
    redis.call('HSET', KEYS[1], 'fp', FP, 'code', code, 'data', data, 'msg', msg, 'done', TOKEN)
  else
    redis.call('HSET', KEYS[1], 'fp', FP, 'done', TOKEN)
  end
  redis.call('PEXPIRE', KEYS[1], TTL)
end
return answer(code, delivery, data, msg, RETRY, op)
