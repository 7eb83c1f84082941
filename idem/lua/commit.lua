-- commit: the outcome of a reserved write, with its audit record (appended
-- first: if it fails, nothing is stored).
local code, delivery, data, msg, op, side = CODE, 'fresh', DATA, MSG, '', SIDE
local k = redis.call('HMGET', K[2], 'fp', 'state', 'token', 'data', 'msg', 'done', 'r:' .. TOKEN)
-- The fresh path: this token's reservation stands. Its reserve bound the
-- call id to this intent and gave the record and the binding their TTLs, so
-- neither is read again nor rewritten beyond what changes.
local mine = k[2] == 'P' and k[3] == TOKEN
local b = {false, false}
if HAS_CALL and not mine then b = redis.call('HMGET', K[1], 'fp', 'done') end
-- A retry of this very commit (its reply was lost after it was applied):
-- answer as the first did, change nothing, audit nothing more. The first
-- commit left its token where its answer can be read again: in the record
-- it wrote (done), or, when it wrote none of its own, beside the record it
-- found (r:<token>: "<code> <delivery>").
if k[7] then
  local sp = string.find(k[7], ' ', 1, true)
  code, delivery = string.sub(k[7], 1, sp - 1), string.sub(k[7], sp + 1)
  if code == 'OK' then return answer('OK', delivery, k[4], k[5]) end
  if code == 'OUTCOME_UNKNOWN' then return answer(code, delivery, '', '', 0, OP) end
  return answer(code, delivery, data, msg, RETRY)
end
if k[6] == TOKEN or b[2] == TOKEN then
  if k[6] == TOKEN and k[1] == FP and k[2] == 'C' then return answer('OK', 'fresh', k[4], k[5]) end
  if code == 'OUTCOME_UNKNOWN' then op = OP end
  return answer(code, 'fresh', data, msg, RETRY, op)
end
local store -- what to write once audited: 'C' commit, 'U' unknown, 'X' release, 'r' the answer only
if k[1] == FP and k[2] == 'C' then
  -- settled meanwhile from a receipt: the stored result stands, and the
  -- side effect was already audited as 'yes' by the status query.
  code, delivery, data, msg, side, store = 'OK', 'local_replay', k[4], k[5], 'no', 'r'
elseif live(k) and k[1] ~= FP then
  -- the key now belongs to another intent (ours was freed and reused):
  -- never overwrite it; our outcome is still reported and audited.
  if code == 'OK' then code, data, msg = 'OUTCOME_UNKNOWN', '', '' end
  store = 'r'
elseif code == 'OK' then
  store = 'C'
elseif code == 'OUTCOME_UNKNOWN' then
  store = 'U'
elseif not live(k) or k[3] == TOKEN then
  -- not started: free the key (ours, or none was stored: a reservation
  -- whose reply was lost may still arrive, and the tombstone refuses it).
  store = 'X'
else
  store = 'r' -- not started, and the key is another holder's
end
if code == 'OUTCOME_UNKNOWN' then op = OP end
audit(code, delivery, side)
if mine and store == 'C' then
  redis.call('HSET', K[2], 'state', 'C', 'data', data, 'msg', msg, 'done', TOKEN)
elseif mine and store == 'U' then
  redis.call('HSET', K[2], 'state', 'U', 'done', TOKEN)
elseif store == 'C' then
  redis.call('HSET', K[2], 'fp', FP, 'state', 'C', 'data', data, 'msg', msg, 'op', OP, 'tool', TOOL,
    'key', KEY, 'call', CALL, 'done', TOKEN)
  redis.call('PEXPIRE', K[2], TTL)
elseif store == 'U' then
  redis.call('HSET', K[2], 'fp', FP, 'state', 'U', 'op', OP, 'tool', TOOL, 'key', KEY,
    'call', CALL, 'done', TOKEN)
  redis.call('PEXPIRE', K[2], TTL)
elseif store == 'X' then
  release(K[2])
else
  redis.call('HSET', K[2], 'r:' .. TOKEN, code .. ' ' .. delivery)
end
-- The call binding: bound to this intent unless it is another's (a
-- reservation answered CALL_ID_CONFLICT, its reply lost, then released).
if HAS_CALL and (not b[1] or b[1] == FP) then
  if TERMINAL[code] then
    redis.call('HSET', K[1], 'fp', FP, 'code', code, 'data', data, 'msg', msg, 'done', TOKEN)
  else
    redis.call('HSET', K[1], 'fp', FP, 'done', TOKEN)
  end
  if not mine then redis.call('PEXPIRE', K[1], TTL) end
end
return answer(code, delivery, data, msg, RETRY, op)
