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
local k, kn = readkey(K[2])
if not k[R.fp] or k[R.state] == 'X' then return {'E', 'gone'} end
if k[R.state] == 'C' then return {'E', 'committed'} end
if k[R.fp] ~= FP or (k[R.token] or '') ~= TOKEN or (k[R.op] or '') ~= OP or (k[R.state] ~= 'P' and k[R.state] ~= 'U') then
  return {'E', 'changed'}
end
if CODE == 'OK' then
  audit('OK', 'fresh', 'yes')
  k[R.state], k[R.data], k[R.msg] = 'C', DATA, false
  save(K[2], k, max(kn, RN), TTL)
  index('k')
  kept(k[R.token]) -- it ran: its budget charge stays
  return answer('OK', 'fresh', DATA, '')
end
audit('NOT_FOUND', 'fresh', 'no')
giveback(k[R.token]) -- it did not run: its budget charge goes back
-- Deleted, not a tombstone: a late commit of the original holder (the
-- write ran after all) is stored as the truth it is.
rcall('DEL', K[2])
if rcall('GET', K[3]) == 'k' .. K[2] then rcall('DEL', K[3]) end
return answer('NOT_FOUND', 'fresh', '', MSG)
