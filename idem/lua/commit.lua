-- commit: the outcome of a reserved write, with its audit record (appended
-- first: if it fails, nothing is stored).
local code, delivery, data, msg, op, side = CODE, 'fresh', DATA, MSG, '', SIDE
local k, kn = readkey(K[2])
-- The answer a commit of this token left beside a record that was not its
-- own (a pair after the record's fields).
local answered = nil
for i = RN + 1, kn - 1, 2 do
  if k[i] == TOKEN then answered = k[i + 1] end
end
-- The fresh path: this token's reservation stands. Its reserve bound the
-- call id to this intent and gave the record and the binding their TTLs, so
-- neither is read again nor given a TTL again.
local mine = k[R.state] == 'P' and k[R.token] == TOKEN
local ttl = not mine and TTL or nil -- what this commit writes over reserve's keeps reserve's TTL
local b, bn = {}, 0
if HAS_CALL and not mine then b, bn = load(K[1]) end
-- A retry of this very commit (its reply was lost after it was applied):
-- answer as the first did, change nothing, audit nothing more. The first
-- commit left its token where its answer can be read again: in the record
-- it wrote (done), or, when it wrote none of its own, beside the record it
-- found ("<code> <delivery>").
if answered then
  local sp = find(answered, ' ', 1, true)
  code, delivery = sub(answered, 1, sp - 1), sub(answered, sp + 1)
  if code == 'OK' then return answer('OK', delivery, k[R.data], k[R.msg]) end
  if code == 'OUTCOME_UNKNOWN' then return answer(code, delivery, '', '', 0, OP) end
  return answer(code, delivery, data, msg, RETRY)
end
if k[R.done] == TOKEN or b[B.done] == TOKEN then
  if k[R.done] == TOKEN and k[R.fp] == FP and k[R.state] == 'C' then
    return answer('OK', 'fresh', k[R.data], k[R.msg])
  end
  if code == 'OUTCOME_UNKNOWN' then op = OP end
  return answer(code, 'fresh', data, msg, RETRY, op)
end
local store -- what to write once audited: 'C' commit, 'U' unknown, 'X' release, 'r' the answer only
if k[R.fp] == FP and k[R.state] == 'C' then
  -- settled meanwhile from a receipt: the stored result stands, and the
  -- side effect was already audited as 'yes' by the status query.
  code, delivery, data, msg, side, store = 'OK', 'local_replay', k[R.data], k[R.msg], 'no', 'r'
elseif live(k) and k[R.fp] ~= FP then
  -- the key now belongs to another intent (ours was freed and reused):
  -- never overwrite it; our outcome is still reported and audited.
  if code == 'OK' then code, data, msg = 'OUTCOME_UNKNOWN', '', '' end
  store = 'r'
elseif code == 'OK' then
  store = 'C'
elseif code == 'OUTCOME_UNKNOWN' then
  store = 'U'
elseif not live(k) or k[R.token] == TOKEN then
  -- not started: free the key (ours, or none was stored: a reservation
  -- whose reply was lost may still arrive, and the tombstone refuses it).
  store = 'X'
else
  store = 'r' -- not started, and the key is another holder's
end
if code == 'OUTCOME_UNKNOWN' then op = OP end
audit(code, delivery, side)
if store == 'C' or store == 'U' then
  -- Written over what the key holds: a released record keeps refusing its
  -- token's late reservation, and answers left beside it stay.
  k[R.fp], k[R.state], k[R.op], k[R.tool], k[R.key], k[R.call], k[R.done] = FP, store, OP, TOOL, KEY, CALL, TOKEN
  if store == 'C' then k[R.data], k[R.msg] = data, msg end
  save(K[2], k, max(kn, RN), ttl)
elseif store == 'X' then
  release(K[2])
  -- The write did not start: the grant it spent paid for nothing.
  if K[7] and rcall('GET', K[7]) == link() then rcall('DEL', K[7]) end
else
  k[kn + 1], k[kn + 2] = TOKEN, code .. ' ' .. delivery
  save(K[2], k, kn + 2)
end
-- The call binding: bound to this intent unless it is another's (a
-- reservation answered CALL_ID_CONFLICT, its reply lost, then released).
-- On the fresh path it is what reserve wrote, this intent linked to K[2],
-- and stays so when the record holds the outcome (C or U, with this token
-- as done for a retried commit to find).
if HAS_CALL and not (mine and (store == 'C' or store == 'U')) and (not b[B.fp] or b[B.fp] == FP) then
  if mine then b, bn = {FP, false, false, false, link()}, B.key end
  b[B.fp], b[B.done] = FP, TOKEN
  if store == 'C' then
    -- The record holds the result; the binding links it, and a retry of
    -- the call id reads it there: a tool's output is stored once.
    b[B.key] = link()
  elseif TERMINAL[code] then
    b[B.code], b[B.data], b[B.msg] = code, data, msg
  end
  save(K[1], b, max(bn, BN), ttl)
end
-- The reservation's budget charge (guard.Budgeter): given back when nothing
-- of this write ran (its side effect is none), forgotten as kept once the
-- write is committed; an unknown outcome keeps it until a settle decides.
if SIDE == 'no' then
  giveback(TOKEN)
elseif store == 'C' then
  kept(TOKEN)
end
return answer(code, delivery, data, msg, RETRY, op)
