-- Shared by every script: each script's body is a function of its own, run
-- after setup has read the call's keys and arguments, so the prelude can be
-- loaded once as a Redis Function library (lib.go) or sent with each script
-- (EVALSHA). K (the keys) and the arguments have the same layout in every
-- script, mirrored field by field by scriptArgs in idem/args.go:
--   K[1] call-id binding    K[2] idempotency record   K[3] operation index
--   K[4] audit stream       K[5] audit head           K[6] the binding of the
--                                                        call whose id is OP
--   K[7] the spent-grant marker of the grant that approved the write: a
--        reserve's, and a commit's that may release (nil otherwise)
-- (K[3] is K[1] again when OP is the call's own id: such an operation has no
-- index, its binding is one.) When BUDGET is set, the last two keys are
-- the tenant's budget hash and its due set (BK, BZ; see Budgets below).
local K
local PACKED           -- the arguments, packed: FP, CODE, DATA and MSG first (see bind)
local FP, NOW          -- fingerprint (its 32 bytes, args.go); now (ms, the guard's clock, a number)
local CALL, KEY        -- call id, effective idempotency key ('' = none)
local OP, TOOL         -- operation id, tool name
local CODE, DATA, MSG  -- the outcome the guard computed
local RETRY, SIDE      -- retry after (ms); side effect (yes/no/unknown)
local BODY, BODYSUM    -- audit body as stored (idem/body.go); the hex SHA-256 of the body itself
local TOKEN            -- the write's reservation token, as bytes ('' = none)
local LEASE            -- reservation lease (ms, a number)
local RESERVATION      -- reserve: the record it stores, packed by the store (idem/args.go)
local TTL              -- retention of records (ms, a string: only ever sent back to Redis)
local AUDIT_TTL        -- retention of an idle audit log (ms, '0': kept)
local RECEIPT          -- settle: 'found', 'absent' or '' (inconclusive)
local GRANT_MS         -- how long K[7], a spent grant's marker, is kept (ms, a string)
local FENCE            -- '1': the script reads the server's maxmemory-policy before anything else (fence)
local CHARGE           -- a budget charge to take, packed (idem/budget.go): '' for none
local BUDGET           -- '1': the last two keys are BK and BZ
local GAP              -- reserve: '1' when the tenant lost records (an eviction an operator acknowledged)
local BK, BZ           -- the tenant's budget hash and its due set, when BUDGET
local HAS_CALL, HAS_KEY
local TAG, LINK        -- K[2] up to its hash tag's end, and the rest: a binding's link to K[2] (tag, link)

local PACK, UNPACK      -- MessagePack strings (mpinit): fields of a table, and back
local ARGS             -- the fields of a packed string as values, not a table (mpinit)
-- Redis's functions and the standard library's, kept in locals: a global
-- costs a table lookup each time it is named. They are found at a call's
-- start (mpinit): a Redis Function library's code is loaded where none of
-- them can be reached.
local function globals() return tonumber, type end -- the globals, before the locals below hide them
local rcall, sha1hex
local sub, find, format, byte, match, char
local tonumber, type, max

-- MessagePack, of strings only: cmsgpack, the C library Redis gives every
-- script, where the server has it; else (miniredis) the Lua below, which
-- writes and reads the same bytes. Records, bindings and a call's arguments
-- are strings of it: a field is a header (0xa0 + length up to 31, else
-- 0xd9, 0xda or 0xdb and the length in 1, 2 or 4 bytes) and its bytes. A
-- call's arguments also hold two numbers (NOW and LEASE), as 0xcf or 0xd3
-- (unsigned or signed) and 8 bytes, which read as numbers.
local function lpack(t, n)
  local out, floor = {}, math.floor
  for i = 1, n do
    local v = t[i]
    local len = #v
    if len < 32 then
      out[i] = char(0xa0 + len) .. v
    elseif len < 256 then
      out[i] = char(0xd9, len) .. v
    elseif len < 65536 then
      out[i] = char(0xda, floor(len / 256), len % 256) .. v
    else
      out[i] = char(0xdb, floor(len / 16777216) % 256, floor(len / 65536) % 256, floor(len / 256) % 256, len % 256) .. v
    end
  end
  return table.concat(out)
end

local function lunpack(s)
  local t, n, pos, last = {}, 0, 1, #s
  while pos <= last do
    local c, len, v = byte(s, pos), nil, nil
    if c >= 0xa0 and c <= 0xbf then
      len, pos = c - 0xa0, pos + 1
    elseif c == 0xd9 then
      len, pos = byte(s, pos + 1), pos + 2
    elseif c == 0xda then
      local a, b = byte(s, pos + 1, pos + 2)
      len, pos = a * 256 + b, pos + 3
    elseif c == 0xdb then
      local a, b, d, e = byte(s, pos + 1, pos + 4)
      len, pos = ((a * 256 + b) * 256 + d) * 256 + e, pos + 5
    elseif c == 0xcf or (c == 0xd3 and byte(s, pos + 1) < 128) then
      v = 0
      for i = pos + 1, pos + 8 do v = v * 256 + byte(s, i) end
      pos = pos + 9
    elseif c == 0xd3 then
      -- negative: two's complement, read as -(~v + 1), exact below 2^53
      v = 0
      for i = pos + 1, pos + 8 do v = v * 256 + (255 - byte(s, i)) end
      v, pos = -(v + 1), pos + 9
    else
      break
    end
    n = n + 1
    if len then
      t[n] = sub(s, pos, pos + len - 1)
      pos = pos + len
    else
      t[n] = v
    end
  end
  return t, n
end

local function mpinit()
  rcall, sha1hex = redis.call, redis.sha1hex
  sub, find, format, byte, match, char = string.sub, string.find, string.format, string.byte, string.match, string.char
  tonumber, type = globals()
  max = math.max
  local ok, mp = pcall(function() return cmsgpack end)
  if ok and mp then
    local pack, unpack1 = mp.pack, mp.unpack
    PACK = function(t, n) return pack(unpack(t, 1, n)) end
    UNPACK = function(s)
      local t = {unpack1(s)}
      return t, #t
    end
    ARGS = unpack1
  else
    PACK, UNPACK = lpack, lunpack
    ARGS = function(s)
      local t, n = lunpack(s)
      return unpack(t, 1, n)
    end
  end
end

-- fence: on a server whose policy may evict (idem/evicted.go), no script
-- reads or writes a key: a key it reads may go at any time, and what it
-- writes may go after it answered. The policy is read here, in the script,
-- so a CONFIG SET that came before this call is seen by it: {'F', policy},
-- packed.
local function fence()
  if FENCE == '' then return nil end
  local info = rcall('INFO', 'memory')
  if find(info, 'maxmemory_policy:noeviction', 1, true) then return nil end
  local policy = match(info, 'maxmemory_policy:([%w%-]+)')
  if policy then return PACK({'F', policy}, 2) end
  return nil
end

-- setup reads the call: its keys, and its arguments, packed as one (idem/
-- args.go). It returns the fence's answer, which ends the call, or nil.
local function setup(keys, packed)
  if not PACK then mpinit() end
  PACKED = packed
  FP, CODE, DATA, MSG, NOW, CALL, KEY, OP, TOOL, RETRY, SIDE, BODY, BODYSUM, TOKEN, LEASE, TTL, AUDIT_TTL,
    RECEIPT, RESERVATION, GRANT_MS, FENCE, CHARGE, BUDGET, GAP = ARGS(packed)
  local n = #keys
  BK, BZ = nil, nil
  if BUDGET ~= '' then
    BK, BZ, n = keys[n - 1], keys[n], n - 2
  end
  if n <= 5 then
    -- The operation is the call's own (idem/args.go): K[3] and K[6] are K[1].
    local c, g = keys[1], nil
    if n == 5 then g = keys[5] end
    K = {c, keys[2], c, keys[3], keys[4], c, g}
  else
    local g = nil
    if n == 7 then g = keys[7] end
    K = {keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], g}
  end
  HAS_CALL, HAS_KEY = CALL ~= '', KEY ~= ''
  TAG, LINK = nil, nil
  return fence()
end

-- tag is K[2] up to its hash tag's end, and link the rest: a binding's
-- link to the record at K[2]. Both are found when first needed.
local function tag()
  if not TAG then
    TAG = match(K[2], '^[^}]*}') or ''
    LINK = sub(K[2], #TAG + 1)
  end
  return TAG
end

local function link()
  tag()
  return LINK
end

-- All keys share one hash tag, so the scripts are legal on a cluster.
--
-- Rule of every script: the audit record is appended before any other write,
-- so an append that fails (the script stops there) leaves no stored result.
-- Records of an idempotency key have a state: P (reserved, until its
-- lease), C (committed), U (outcome unknown), X (released by its token: free
-- for anyone, but a late copy of that token's reservation is refused).

local TERMINAL = {OK = true, NOT_FOUND = true, UNKNOWN_TOOL = true, INVALID_ARGUMENTS = true,
  IDEMPOTENCY_CONFLICT = true, CALL_ID_CONFLICT = true}

-- lasthead finds where the chain stands when its head key is gone (evicted,
-- or lost apart from the stream): the stream's last record, or, if every
-- record was trimmed, the last id the stream gave. Sequence numbers are
-- never reused; a link that cannot be recovered fails verification.
local function lasthead()
  local last = rcall('XREVRANGE', K[4], '+', '-', 'COUNT', 1)[1]
  if last then
    local f = last[2]
    for i = 1, #f, 2 do
      if f[i] == 'hash' then return tonumber(match(last[1], '^%d+')), f[i + 1] end
    end
    return tonumber(match(last[1], '^%d+')), ''
  end
  if rcall('EXISTS', K[4]) == 1 then
    local info = rcall('XINFO', 'STREAM', K[4])
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then return tonumber(match(info[i + 1], '^%d+')), '' end
    end
  end
  return 0, ''
end

-- audit appends one hash-chained record; its id is its sequence number. The
-- chain head is one string, "<seq> <hash>".
local function audit(code, delivery, side)
  local head, seq, prev = rcall('GET', K[5]), 0, ''
  if head then
    local sp = find(head, ' ', 1, true)
    seq, prev = tonumber(sub(head, 1, sp - 1)), sub(head, sp + 1)
  else
    seq, prev = lasthead()
  end
  local id = format('%d', seq + 1)
  local hash = sha1hex(prev .. '\n' .. id .. '\n' .. BODYSUM .. '\n' .. code .. '\n' .. delivery .. '\n' .. side)
  rcall('XADD', K[4], id .. '-1', 'body', BODY, 'code', code,
    'delivery', delivery, 'side', side, 'prev', prev, 'hash', hash)
  if AUDIT_TTL == '0' then
    rcall('SET', K[5], id .. ' ' .. hash)
  else
    -- An idle tenant's whole log (stream and head together) expires.
    rcall('SET', K[5], id .. ' ' .. hash, 'PX', AUDIT_TTL)
    rcall('PEXPIRE', K[4], AUDIT_TTL)
  end
end

-- answer is a script's reply: {'R', code, delivery, data, msg, retry, op},
-- packed as one string (a table of strings costs Redis several lookups per
-- reply to convert; idem/reply.go reads both). The most common answer is
-- the outcome the store sent, fresh: {'R', CODE, 'fresh', DATA, MSG, RETRY,
-- ''}; it is SENT, {'S'} packed, and the store reads it from what it sent.
local SENT = '\161S'
local function answer(code, delivery, data, msg, retry, op)
  data, msg, op = data or '', msg or '', op or ''
  if code == CODE and delivery == 'fresh' and data == DATA and msg == MSG and retry == RETRY and op == '' then
    return SENT
  end
  if type(retry) == 'number' then retry = format('%d', retry) end
  return PACK({'R', code, delivery, data, msg, retry or '0', op}, 7)
end

-- RESERVED is reserve's reply when the reservation is made: {'T'}, packed;
-- MAYBELOST when it is made in a tenant that lost records and the key has
-- none: {'L'}. HELD when it stood already under the entry's token: {'H'};
-- HELDLOST when it stood already and was made as MAYBELOST: {'HL'}.
local RESERVED = '\161T'
local MAYBELOST = '\161L'
local HELD = '\161H'
local HELDLOST = '\162HL'

-- Records and bindings are strings: their fields in a fixed order, packed
-- (PACK: MessagePack strings), so that one SET stores one with its TTL,
-- any bytes fit, and a record costs a string, not a hash (a Redis hash with
-- a value over 64 bytes, a tool's output, is a hashtable several times its
-- size). An empty field reads as false, like a missing hash field.
--   record:  fp state data msg op lease token tool key call done, then pairs
--            of a token and its commit's answer ("<code> <delivery>") for
--            commits that found the key another's
--   binding: fp code data msg key done; key links the record the call
--            reserved: the record's key after the tenant's hash tag
local R = {fp = 1, state = 2, data = 3, msg = 4, op = 5, lease = 6, token = 7, tool = 8, key = 9, call = 10,
  done = 11}
local RN = 11
local B = {fp = 1, code = 2, data = 3, msg = 4, key = 5, done = 6}
local BN = 6

-- encode writes a record or a binding: its n fields packed, an empty one
-- as ''.
local function encode(t, n)
  -- Room for a record's fields from the start: a table grown one field at
  -- a time is rebuilt at each power of two. (Only the first n are packed.)
  local out = {false, false, false, false, false, false, false, false, false, false, false}
  for i = 1, n do
    local v = t[i]
    if not v then
      v = ''
    elseif type(v) == 'number' then
      v = format('%d', v)
    end
    out[i] = v
  end
  -- A record's done token is most often its own token: '=' says so.
  if n >= RN and t[R.done] and t[R.done] == t[R.token] then out[R.done] = '=' end
  return PACK(out, n)
end

-- decode reads the fields encode wrote, false where one is empty, and
-- their number.
local function decode(s)
  local t, n = UNPACK(s)
  for i = 1, n do
    if t[i] == '' then t[i] = false end
  end
  return t, n
end

-- load reads a record or a binding as a table and its length: {} and 0
-- when there is none.
local function load(key)
  local s = rcall('GET', key)
  if s then return decode(s) end
  return {}, 0
end

-- save writes a record or a binding: with a TTL of ttl ms, or keeping the
-- key's TTL when ttl is nil.
local function save(key, t, n, ttl)
  if ttl then
    rcall('SET', key, encode(t, n), 'PX', ttl)
  else
    rcall('SET', key, encode(t, n), 'KEEPTTL')
  end
end

-- linked is the key of the record a binding's link names.
local function linked(l)
  return l and tag() .. l
end

-- packedlen is how long a field of n bytes is, packed.
local function packedlen(n)
  if n < 32 then return n + 1 elseif n < 256 then return n + 2 elseif n < 65536 then return n + 3 end
  return n + 5
end

-- bind binds a new call id to the fingerprint, with the result if terminal.
-- The arguments start with FP, CODE, DATA and MSG, packed as encode packs
-- them: a binding of the call's own outcome, or of its fingerprint alone,
-- is their start, not packed again.
local function bind(code, data, msg)
  if not HAS_CALL then return end
  data, msg = data or '', msg or ''
  if TERMINAL[code] then
    if code == CODE and data == DATA and msg == MSG then
      rcall('SET', K[1], sub(PACKED, 1, packedlen(#FP) + packedlen(#CODE) + packedlen(#DATA) + packedlen(#MSG)), 'PX', TTL)
    else
      save(K[1], {FP, code, data, msg}, 4, TTL)
    end
  else
    rcall('SET', K[1], sub(PACKED, 1, packedlen(#FP)), 'PX', TTL)
  end
end

-- keycheck answers from an idempotency record that exists: a conflict, a
-- stored result, in progress, or unknown (a write whose outcome is unknown,
-- or whose holder's lease expired, is never executed blind again). The
-- last value is true when an expired reservation must be marked unknown.
local function keycheck(k)
  if k[1] ~= FP then
    return 'IDEMPOTENCY_CONFLICT', 'fresh', '', '', 0, '', false
  elseif k[2] == 'C' then
    return 'OK', 'local_replay', k[3], k[4], 0, '', false
  elseif k[2] == 'P' and tonumber(k[6]) > NOW then
    return 'IN_PROGRESS', 'fresh', '', '', tonumber(k[6]) - NOW, '', false
  end
  return 'OUTCOME_UNKNOWN', 'fresh', '', '', 0, k[5], k[2] == 'P'
end

-- live reports whether an idempotency record holds the key (a released
-- record does not).
local function live(k)
  return k[1] and k[2] ~= 'X'
end

-- NEVER is what the operation index holds for an operation of which nothing
-- ran (a write that failed a check, was refused its spent grant, or whose
-- reservation was released): a status query about it is NOT_FOUND, never a
-- receipt lookup under a guessed key. Anything else indexed replaces it.
local NEVER = 'n'

-- never marks the call's operation as one of which nothing ran, unless the
-- index names something already. An operation named after its call needs
-- no mark: its binding says as much.
local function never()
  if OP ~= CALL and HAS_KEY then rcall('SET', K[3], NEVER, 'PX', TTL, 'NX') end
end

-- index points the operation id at the record holding its outcome when the
-- operation id is not the call's own: an operation whose id is its call id
-- is found through its call binding (K[6], the binding of the operation id),
-- which names the outcome or the record. Otherwise K[3] keeps a reference:
-- 'c' and a call binding's key, or 'k' and a record's. The first operation
-- keeps its id: a call binding never replaces what names an operation
-- already, and a write record replaces only a call binding or a released
-- record. kind is 'c' for the call's binding (K[1]), 'k' for its record
-- (K[2]).
local function index(kind)
  if OP == CALL then return end
  local key = kind == 'c' and K[1] or K[2]
  local ref = kind .. key
  local own = load(K[6])
  if own[B.fp] then
    -- A call whose id is the operation id is bound: it names the operation,
    -- unless it is a read and this a write, or its write was released.
    local l = linked(own[B.key])
    if kind == 'c' or l == key then return end
    if l and live(load(l)) then return end
  end
  if kind == 'c' then
    -- It takes over only from a mark that nothing ran (NEVER).
    if not rcall('SET', K[3], ref, 'PX', TTL, 'NX') and rcall('GET', K[3]) == NEVER then
      rcall('SET', K[3], ref, 'PX', TTL)
    end
    return
  end
  local cur = rcall('GET', K[3])
  if cur and cur ~= ref and sub(cur, 1, 1) == 'k' and live(load(sub(cur, 2))) then
    return
  end
  rcall('SET', K[3], ref, 'PX', TTL)
end

-- readkey reads an idempotency record: its fields (R) and its length.
local function readkey(key)
  local t, n = load(key)
  if t[R.done] == '=' then t[R.done] = t[R.token] end
  return t, n
end

-- precheck applies checks 1 and 2 of the contract. When they decide the
-- answer it is audited and returned; otherwise it returns nil, the call's
-- binding as read (B; {} when the call id is not bound, to this
-- fingerprint) and its length. own, when given, is K[2]'s record as
-- readkey read it, and ownn its length.
local function precheck(own, ownn)
  local c, cn, bound = {}, 0, nil
  if HAS_CALL then
    c, cn = load(K[1])
    if c[B.fp] then
      if c[B.fp] ~= FP then
        audit('CALL_ID_CONFLICT', 'fresh', 'no')
        return answer('CALL_ID_CONFLICT', 'fresh'), c, cn
      end
      if c[B.code] then
        audit(c[B.code], 'local_replay', 'no')
        return answer(c[B.code], 'local_replay', c[B.data], c[B.msg]), c, cn
      end
      bound = linked(c[B.key])
    end
  end
  -- The record to check: the one this call id already reserved (its own
  -- operation, whatever key the retry carries), else the key's.
  local key, k, kn = nil, nil, 0
  if bound then
    if own and bound == K[2] then k, kn = own, ownn else k, kn = readkey(bound) end
    if live(k) then key = bound end
  end
  if not key and HAS_KEY then
    if own then k, kn = own, ownn else k, kn = readkey(K[2]) end
    if live(k) then key = K[2] end
  end
  if not key then return nil, c, cn end
  local code, delivery, data, msg, retry, op, stale = keycheck(k)
  audit(code, delivery, 'no')
  if stale then
    k[R.state] = 'U'
    save(key, k, kn)
  end
  if not c[B.fp] then
    bind(code, data, msg)
  elseif TERMINAL[code] and key ~= bound then
    -- (an answer from the record the binding links is read there again)
    c[B.code], c[B.data], c[B.msg] = code, data, msg
    save(K[1], c, max(cn, B.msg))
  end
  if TERMINAL[code] and HAS_CALL then index('c') end
  return answer(code, delivery, data, msg, retry, op), c, cn
end

-- record reads the operation a status query names: its record key and
-- fields. The index names it, or else the binding of the call whose id is
-- the operation id (K[6]); failing both, the record of the query's key. A
-- record answers only for the operation it ran under (its op): an
-- idempotency key that another operation took never answers for this one.
-- Without a record it returns nil and whether the store knows that nothing
-- of the operation ran: its call is bound but holds no live reservation,
-- or the record found is another operation's.
local function record()
  local ref, known = false, false
  if K[3] ~= K[1] then ref = rcall('GET', K[3]) end -- else it names no index (idem/args.go)
  if ref == NEVER then ref, known = false, true end
  if not ref then
    local c = load(K[6])
    if c[B.code] then return {kind = 'c', state = 'C', code = c[B.code], data = c[B.data], msg = c[B.msg]} end
    if c[B.key] then ref = 'k' .. linked(c[B.key]) end
    known = known or (c[B.fp] and true or false)
  end
  if not ref and HAS_KEY and not known then ref = 'k' .. K[2] end -- the index alone was lost
  if not ref then return nil, known end
  local kind, key = sub(ref, 1, 1), sub(ref, 2)
  if kind == 'c' then
    local c = load(key)
    if not c[B.code] then return nil, false end
    return {kind = 'c', state = 'C', code = c[B.code], data = c[B.data], msg = c[B.msg]}
  end
  local k, kn = readkey(key)
  if not live(k) then return nil, known end
  if (k[R.op] or '') ~= OP then return nil, true end
  return {kind = 'k', key = key, fp = k[R.fp], state = k[R.state], code = 'OK', data = k[R.data],
    msg = k[R.msg], op = k[R.op] or '', lease = tonumber(k[R.lease]), tool = k[R.tool] or '',
    idem = k[R.key] or '', call = k[R.call] or '', rec = k, n = kn}
end

-- settled answers a status query from a stored outcome: not found, or a
-- stored result (replayed). It returns the record for the other cases. With
-- nothing stored, a query that names its tool and key may be asking about
-- a record the store lost: it gets a lost record ({lost = true}) so the
-- receipt is asked before the answer is NOT_FOUND, unless the store knows
-- that nothing of the operation ran.
local function settled()
  local r, known = record()
  if not r then
    if not known and HAS_KEY and TOOL ~= '' then
      return nil, {lost = true, tool = TOOL, idem = KEY, fp = FP, call = '', op = OP, lease = 0}
    end
    audit('NOT_FOUND', 'fresh', 'no')
    return answer('NOT_FOUND', 'fresh'), nil
  end
  if r.state == 'C' then
    audit(r.code, 'local_replay', 'no')
    return answer(r.code, 'local_replay', r.data, r.msg), nil
  end
  return nil, r
end

-- release frees a reserved key. Released by its own token, the record
-- becomes a tombstone of that token for as long as a late copy of the
-- reservation could still arrive (LEASE: the store passes one minute);
-- released by a status query, it is deleted. The operation's index then
-- says that nothing of it ran.
local function release(key)
  if TOKEN ~= '' then
    local t = {}
    t[R.state], t[R.token], t[R.done] = 'X', TOKEN, TOKEN
    save(key, t, RN, max(LEASE, 1000))
  else
    rcall('DEL', key)
  end
  if OP ~= CALL and rcall('GET', K[3]) == 'k' .. key then rcall('SET', K[3], NEVER, 'KEEPTTL') end
end

-- Budgets (guard.Budgeter). A tenant's counters are one hash, BK, with no
-- TTL (a volatile-* policy never evicts it, as it never evicts audit logs):
--   'r:<scope>:<tool>' (base64url)  "<calls> <cost>" of a run's executions
--   'p:<period start, ms>'          the cost spent in that period
--   't:<token>'                     what the token took, "<cost> <r field>
--                                   <p field>", or 'X' once given back
-- BZ, a sorted set, holds each field's due time (ms, the guard's clock):
-- a run's counter its retention (TTL) after its last charge, a period's
-- counter a period after it ends, a token's its retention (a token given
-- back, a minute). Each charge drops up to four due fields: retention only.

-- runspend reads a run's counter: calls and cost.
local function runspend(rf)
  local v = rcall('HGET', BK, rf)
  if not v then return 0, 0 end
  local sp = find(v, ' ', 1, true)
  return tonumber(sub(v, 1, sp - 1)), tonumber(sub(v, sp + 1))
end

-- charge takes CHARGE under TOKEN if every bound has room: 0 taken (or
-- taken before under this token: nothing more), 1 the run's bound has no
-- room, 2 the tenant's, 3 the token's charge was given back (nothing
-- taken).
local function charge()
  local tf = 't:' .. TOKEN
  local prev = rcall('HGET', BK, tf)
  if prev then
    if prev == 'X' then return 3 end
    return 0
  end
  local due = rcall('ZRANGEBYSCORE', BZ, '-inf', NOW, 'LIMIT', 0, 4)
  if #due > 0 then
    rcall('HDEL', BK, unpack(due))
    rcall('ZREM', BZ, unpack(due))
  end
  local cost, maxCalls, maxCost, limit, rf, pf, pdue = ARGS(CHARGE)
  local calls, spent = 0, 0
  if rf ~= '' then
    calls, spent = runspend(rf)
    if (maxCalls > 0 and calls + 1 > maxCalls) or (maxCost > 0 and spent + cost > maxCost) then return 1 end
  end
  if pf ~= '' and tonumber(rcall('HGET', BK, pf) or '0') + cost > limit then return 2 end
  local keep = NOW + tonumber(TTL)
  if rf ~= '' then
    rcall('HSET', BK, rf, format('%d %d', calls + 1, spent + cost))
    rcall('ZADD', BZ, keep, rf)
  end
  if pf ~= '' then
    rcall('HINCRBY', BK, pf, cost)
    rcall('ZADD', BZ, 'NX', pdue, pf)
  end
  rcall('HSET', BK, tf, format('%d', cost) .. ' ' .. rf .. ' ' .. pf)
  rcall('ZADD', BZ, keep, tf)
  return 0
end

-- giveback gives back what token took, once: it becomes 'X', which a late
-- copy of its charge finds. Without the budget keys (no charge can have
-- been taken) it does nothing.
local function giveback(token)
  if not BK or not token or token == '' then return end
  local tf = 't:' .. token
  local v = rcall('HGET', BK, tf)
  if v == 'X' then return end
  if v then
    local cost, rf, pf = match(v, '^(%d+) (%S*) (%S*)$')
    cost = tonumber(cost)
    if rf ~= '' and rcall('HEXISTS', BK, rf) == 1 then
      local calls, spent = runspend(rf)
      rcall('HSET', BK, rf, format('%d %d', calls - 1, spent - cost))
    end
    if pf ~= '' and rcall('HEXISTS', BK, pf) == 1 then rcall('HINCRBY', BK, pf, -cost) end
  end
  rcall('HSET', BK, tf, 'X')
  rcall('ZADD', BZ, NOW + max(LEASE, 1000), tf)
end

-- kept forgets a token whose charge stays taken: the write ran.
local function kept(token)
  if not BK or not token or token == '' then return end
  local tf = 't:' .. token
  if rcall('HDEL', BK, tf) == 1 then rcall('ZREM', BZ, tf) end
end
