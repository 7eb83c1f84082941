-- finish: a dispatch that reserved nothing (a failed check, or a read that
-- ran). The audit record is appended before anything is stored.
local own, ownn = nil, 0
if HAS_KEY then own, ownn = readkey(K[2]) end
local pre, c, cn = precheck(own, ownn)
if pre then return pre end
audit(CODE, 'fresh', SIDE)
if not c[B.fp] then
  bind(CODE, DATA, MSG)
elseif TERMINAL[CODE] then
  c[B.code], c[B.data], c[B.msg] = CODE, DATA, MSG
  save(K[1], c, max(cn, B.msg))
end
if CODE == 'OK' and HAS_KEY then
  -- The key holds no live record (precheck answered otherwise); a released
  -- record's tombstone keeps refusing its token's late reservation.
  local t = own or {}
  t[R.fp], t[R.state], t[R.data], t[R.msg], t[R.op] = FP, 'C', DATA, MSG, OP
  t[R.tool], t[R.key], t[R.call] = TOOL, KEY, CALL
  save(K[2], t, max(ownn, RN), TTL)
  index('k')
elseif TERMINAL[CODE] and HAS_CALL then
  index('c')
elseif not TERMINAL[CODE] then
  never()
end
return answer(CODE, 'fresh', DATA, MSG, RETRY, '')
