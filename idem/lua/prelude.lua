-- Shared by every script. KEYS and ARGV have the same layout in all of them:
--   KEYS[1] call-id binding    KEYS[2] idempotency record   KEYS[3] operation index
--   KEYS[4] audit stream       KEYS[5] audit head
--   ARGV[1] fingerprint        ARGV[2] now (ms, the guard's clock)
--   ARGV[3] has call id (1/0)  ARGV[4] has idempotency key (1/0)
--   ARGV[5] code   ARGV[6] data   ARGV[7] message   ARGV[8] retry after (ms)
--   ARGV[9] side effect (yes/no/unknown)
--   ARGV[10] audit body        ARGV[11] hex SHA-256 of the audit body
--   ARGV[12] ttl (ms)          ARGV[13] operation id   ARGV[14] tool
--   ARGV[15] effect (r/w)      ARGV[16] lease (ms) or reservation token
--   ARGV[17] call id           ARGV[18] idempotency key
--   ARGV[19] audit ttl (ms, 0: kept)                       ARGV[20] lease (ms, reserve)
-- All keys share one hash tag, so the scripts are legal on a cluster.
local FP, NOW = ARGV[1], tonumber(ARGV[2])
local HAS_CALL, HAS_KEY = ARGV[3] == '1', ARGV[4] == '1'
local TTL = tonumber(ARGV[12])
local OP = ARGV[13]

local TERMINAL = {OK = true, NOT_FOUND = true, UNKNOWN_TOOL = true, INVALID_ARGUMENTS = true,
  IDEMPOTENCY_CONFLICT = true, CALL_ID_CONFLICT = true}

-- audit appends one hash-chained record; its id is its sequence number. The
-- chain head is one string, "<seq> <hash>"; a head kept by an earlier
-- version as a hash {seq, hash} is read once and replaced.
local function audit(code, delivery, side)
  local head, seq, prev = redis.pcall('GET', KEYS[5]), 1, ''
  if type(head) == 'table' and head.err then
    local h = redis.call('HMGET', KEYS[5], 'seq', 'hash')
    redis.call('DEL', KEYS[5])
    head = h[1] and (h[1] .. ' ' .. (h[2] or '')) or false
  end
  if head then
    local sp = string.find(head, ' ', 1, true)
    seq, prev = tonumber(string.sub(head, 1, sp - 1)) + 1, string.sub(head, sp + 1)
  end
  local id = string.format('%d', seq)
  local hash = redis.sha1hex(prev .. '\n' .. id .. '\n' .. ARGV[11] .. '\n' .. code .. '\n' .. delivery .. '\n' .. side)
  redis.call('XADD', KEYS[4], id .. '-1', 'body', ARGV[10], 'code', code,
    'delivery', delivery, 'side', side, 'prev', prev, 'hash', hash)
  if ARGV[19] == '0' then
    redis.call('SET', KEYS[5], id .. ' ' .. hash)
  else
    -- An idle tenant's whole log (stream and head together) expires.
    redis.call('SET', KEYS[5], id .. ' ' .. hash, 'PX', ARGV[19])
    redis.call('PEXPIRE', KEYS[4], ARGV[19])
  end
end

local function answer(code, delivery, data, msg, retry, op)
  return {'R', code, delivery, data or '', msg or '', tostring(retry or 0), op or ''}
end

-- bind binds a new call id to the fingerprint, with the result if terminal.
local function bind(code, data, msg)
  if not HAS_CALL then return end
  if TERMINAL[code] then
    redis.call('HSET', KEYS[1], 'fp', FP, 'code', code, 'data', data or '', 'msg', msg or '')
  else
    redis.call('HSET', KEYS[1], 'fp', FP)
  end
  redis.call('PEXPIRE', KEYS[1], TTL)
end

-- keycheck answers from an idempotency record that exists: a conflict, a
-- stored result, in progress, or unknown (a write whose outcome is unknown,
-- or whose holder's lease expired, is never executed blind again).
local function keycheck(key, k)
  if k[1] ~= FP then
    return 'IDEMPOTENCY_CONFLICT', 'fresh', '', '', 0, ''
  elseif k[2] == 'C' then
    return 'OK', 'local_replay', k[3], k[4], 0, ''
  elseif k[2] == 'P' and tonumber(k[6]) > NOW then
    return 'IN_PROGRESS', 'fresh', '', '', tonumber(k[6]) - NOW, ''
  end
  if k[2] == 'P' then redis.call('HSET', key, 'state', 'U') end
  return 'OUTCOME_UNKNOWN', 'fresh', '', '', 0, k[5]
end

-- index points the operation id at the record holding its outcome. A call
-- binding ('c') never replaces what the index names; a write record ('k')
-- replaces it unless it names another live write record: the first
-- operation keeps its id.
local function index(ref)
  if string.sub(ref, 1, 1) == 'c' then
    redis.call('SET', KEYS[3], ref, 'PX', TTL, 'NX')
    return
  end
  local cur = redis.call('GET', KEYS[3])
  if cur and cur ~= ref and string.sub(cur, 1, 1) == 'k' and redis.call('EXISTS', string.sub(cur, 2)) == 1 then
    return
  end
  redis.call('SET', KEYS[3], ref, 'PX', TTL)
end

-- precheck applies checks 1 and 2 of the contract. When they decide the
-- answer it is audited and returned; otherwise it returns nil and whether
-- the call id was already bound (to this fingerprint).
local function precheck()
  local bound, linked = false, nil
  if HAS_CALL then
    local c = redis.call('HMGET', KEYS[1], 'fp', 'code', 'data', 'msg', 'key')
    if c[1] then
      bound = true
      if c[1] ~= FP then
        audit('CALL_ID_CONFLICT', 'fresh', 'no')
        return answer('CALL_ID_CONFLICT', 'fresh'), bound
      end
      if c[2] and c[2] ~= '' then
        audit(c[2], 'local_replay', 'no')
        return answer(c[2], 'local_replay', c[3], c[4]), bound
      end
      linked = c[5]
    end
  end
  -- The record to check: the one this call id already reserved (its own
  -- operation, whatever key the retry carries), else the key's.
  local key, k = nil, nil
  if linked and linked ~= '' then
    k = redis.call('HMGET', linked, 'fp', 'state', 'data', 'msg', 'op', 'lease')
    if k[1] then key = linked end
  end
  if not key and HAS_KEY then
    k = redis.call('HMGET', KEYS[2], 'fp', 'state', 'data', 'msg', 'op', 'lease')
    if k[1] then key = KEYS[2] end
  end
  if not key then return nil, bound end
  local code, delivery, data, msg, retry, op = keycheck(key, k)
  if not bound then
    bind(code, data, msg)
  elseif TERMINAL[code] then
    redis.call('HSET', KEYS[1], 'code', code, 'data', data, 'msg', msg)
  end
  if TERMINAL[code] and HAS_CALL then index('c' .. KEYS[1]) end
  audit(code, delivery, 'no')
  return answer(code, delivery, data, msg, retry, op), bound
end

-- record reads the operation a status query names: its record key and fields.
local function record()
  local ref = redis.call('GET', KEYS[3])
  if not ref then return nil end
  local kind, key = string.sub(ref, 1, 1), string.sub(ref, 2)
  if kind == 'c' then
    local c = redis.call('HMGET', key, 'code', 'data', 'msg')
    if not c[1] or c[1] == '' then return nil end
    return {kind = 'c', state = 'C', code = c[1], data = c[2], msg = c[3]}
  end
  local k = redis.call('HMGET', key, 'fp', 'state', 'data', 'msg', 'op', 'lease', 'tool', 'key', 'call')
  if not k[1] then return nil end
  return {kind = 'k', key = key, fp = k[1], state = k[2], code = 'OK', data = k[3], msg = k[4], op = k[5],
    lease = tonumber(k[6]), tool = k[7], idem = k[8], call = k[9]}
end

-- settled answers a status query from a stored outcome: not found, or a
-- stored result (replayed). It returns the record for the other cases.
local function settled()
  local r = record()
  if not r then
    audit('NOT_FOUND', 'fresh', 'no')
    return answer('NOT_FOUND', 'fresh'), nil
  end
  if r.state == 'C' then
    audit(r.code, 'local_replay', 'no')
    return answer(r.code, 'local_replay', r.data, r.msg), nil
  end
  return nil, r
end
