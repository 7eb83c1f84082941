package approvals

import "github.com/redis/go-redis/v9"

// luaCreate stores one pending request (or one denied at once because the
// run's human already denied the intent) and audits it. Its arguments
// start at ARGV[base+1]: id, request JSON, expiry (ms), operation id, tool,
// fingerprint, requester, run id; now is ARGV[1] and the retention (ms)
// ARGV[2]. It returns 1 when the request waits for a human.
const luaCreate = `
local function create(reqKey, pendingKey, auditKey, deniedKey, base)
  local now, retain = tonumber(ARGV[1]), tonumber(ARGV[2])
  local id, exp = ARGV[base+1], tonumber(ARGV[base+3])
  local status, event, reason = 'pending', 'requested', ''
  if deniedKey and redis.call('EXISTS', deniedKey) == 1 then
    status, event, reason = 'denied', 'denied_again', 'a human denied this same action earlier in this run'
  end
  redis.call('HSET', reqKey, 'json', ARGV[base+2], 'status', status, 'expires', ARGV[base+3],
    'by', '', 'at', (status == 'pending') and '' or ARGV[1], 'reason', reason)
  redis.call('PEXPIRE', reqKey, exp - now + retain)
  redis.call('XADD', auditKey, '*', 'event', event, 'request', id, 'run', ARGV[base+8], 'tool', ARGV[base+5],
    'fingerprint', ARGV[base+6], 'requested_by', ARGV[base+7], 'decided_by', '', 'reason', reason, 'at', ARGV[1])
  if status ~= 'pending' then return 0 end
  redis.call('ZADD', pendingKey, exp, id)
  redis.call('ZREMRANGEBYSCORE', pendingKey, '-inf', now - retain)
  return 1
end
`

// askScript: KEYS req, pending, audit; ARGV now, retain, then one request.
var askScript = redis.NewScript(luaCreate + `
return create(KEYS[1], KEYS[2], KEYS[3], nil, 2)
`)

// parkScript parks a paused run with its requests, replacing what the run
// held before (a run parks again when it pauses again after a resume).
// KEYS: run, pending, ready, audit, runs, claims, then n request keys and
// n denied-intent keys. ARGV: now, retain, run id, state, principal, then
// 8 arguments per request (see luaCreate). It returns how many requests
// wait for a human; at 0 the run is ready at once.
var parkScript = redis.NewScript(luaCreate + `
local n = (#KEYS - 6) / 2
local waiting, ids = 0, {}
for i = 1, n do
  waiting = waiting + create(KEYS[6+i], KEYS[2], KEYS[4], KEYS[6+n+i], 5 + (i-1)*8)
  ids[i] = ARGV[5 + (i-1)*8 + 1]
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'principal', ARGV[5], 'waiting', waiting, 'requests', table.concat(ids, ','))
local maxExp = tonumber(ARGV[1])
for i = 1, n do maxExp = math.max(maxExp, tonumber(ARGV[5 + (i-1)*8 + 3])) end
redis.call('PEXPIRE', KEYS[1], maxExp - tonumber(ARGV[1]) + tonumber(ARGV[2]))
redis.call('SADD', KEYS[5], ARGV[3])
redis.call('ZREM', KEYS[6], ARGV[3])
if waiting == 0 then redis.call('RPUSH', KEYS[3], ARGV[3]) end
return waiting
`)

// decideScript settles one request: approved, denied or expired. KEYS:
// req, pending, audit, run, ready, denied-intent. ARGV: id, now, outcome,
// decided by, reason, retain, run id, tool, fingerprint, requester, note.
// Replies {"ok"}, {"missing"}, {"expired"} (and records the expiry), or
// {status, by, at} of the decision already made.
var decideScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing'} end
if st ~= 'pending' then
  return {st, redis.call('HGET', KEYS[1], 'by') or '', redis.call('HGET', KEYS[1], 'at') or ''}
end
local now = tonumber(ARGV[2])
local outcome, by, reason, note = ARGV[3], ARGV[4], ARGV[5], ARGV[11] or ''
local late = outcome ~= 'expired' and now >= tonumber(redis.call('HGET', KEYS[1], 'expires'))
if late or outcome == 'expired' then
  outcome, by, reason, note = 'expired', '', 'nobody decided before it expired', ''
end
redis.call('HSET', KEYS[1], 'status', outcome, 'by', by, 'at', ARGV[2], 'reason', reason, 'note', note)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*', 'event', outcome, 'request', ARGV[1], 'run', ARGV[7], 'tool', ARGV[8],
  'fingerprint', ARGV[9], 'requested_by', ARGV[10], 'decided_by', by, 'reason', reason, 'note', note, 'at', ARGV[2])
if outcome == 'denied' then redis.call('SET', KEYS[6], '1', 'PX', ARGV[6]) end
if redis.call('HEXISTS', KEYS[4], 'state') == 1 then
  if redis.call('HINCRBY', KEYS[4], 'waiting', -1) == 0 then redis.call('RPUSH', KEYS[5], ARGV[7]) end
end
if late then return {'expired'} end
return {'ok'}
`)

// claimScript claims one run of a tenant to resume: first one whose
// claim's lease ran out (its worker died), else the next ready one. KEYS:
// ready, claims. ARGV: now, lease (ms). Replies the run id, or nil.
var claimScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local id = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1)[1]
if not id then id = redis.call('LPOP', KEYS[1]) end
if not id then return false end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
return id
`)

// finishScript forgets a resumed run. KEYS: run, runs, claims. ARGV: run id.
var finishScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
`)
