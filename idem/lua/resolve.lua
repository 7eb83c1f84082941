-- resolve: an operator settles an unknown or stuck write by hand (Store.Resolve,
-- cmd/toolctl). K and the arguments have the prelude's layout; K[1] names no
-- call (CALL is ''), K[2] is the record, K[3] the index of the
-- record's own operation. FP, OP, TOOL and TOKEN are what the operator's
-- tool read from the record: if the record changed since (committed,
-- released, reserved again), nothing is resolved. CODE is the verdict: 'OK'
-- (the write took place; DATA is its result) or 'NOT_FOUND' (it did not;
-- the key is released). BODY names the operator. The tool refused a record
-- whose lease has not expired unless forced; the token check keeps that
-- decision valid here, since a reservation's lease never changes.
local k = redis.call('HMGET', K[2], 'fp', 'state', 'token', 'op')
if not k[1] or k[2] == 'X' then return {'E', 'gone'} end
if k[2] == 'C' then return {'E', 'committed'} end
if k[1] ~= FP or (k[3] or '') ~= TOKEN or (k[4] or '') ~= OP or (k[2] ~= 'P' and k[2] ~= 'U') then
  return {'E', 'changed'}
end
if CODE == 'OK' then
  audit('OK', 'fresh', 'yes')
  redis.call('HSET', K[2], 'state', 'C', 'data', DATA, 'msg', '')
  redis.call('PEXPIRE', K[2], TTL)
  index('k' .. K[2])
  return answer('OK', 'fresh', DATA, '')
end
audit('NOT_FOUND', 'fresh', 'no')
-- Deleted, not a tombstone: a late commit of the original holder (the
-- write ran after all) is stored as the truth it is.
redis.call('DEL', K[2])
if redis.call('GET', K[3]) == 'k' .. K[2] then redis.call('DEL', K[3]) end
return answer('NOT_FOUND', 'fresh', '', MSG)
