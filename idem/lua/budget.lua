-- budget: takes or gives back one execution's charge (guard.Budgeter).
-- A script of its own, not of the library: it shares no state with the
-- dispatch's scripts. Both keys carry the tenant's hash tag.
--   KEYS[1] the run's counter of the tool (a hash: calls, cost)
--   KEYS[2] the tenant's counter of the period (a string)
--   ARGV    op ('charge' or 'refund'), cost, max calls, max cost,
--           tenant limit, run TTL (ms), period TTL (ms), run ('1': the
--           run's bounds apply), tenant ('1': the tenant's applies)
local op, cost = ARGV[1], tonumber(ARGV[2])
local maxCalls, maxCost, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local run, tenant = ARGV[8] == '1', ARGV[9] == '1'
if op == 'refund' then
  if run then
    redis.call('HINCRBY', KEYS[1], 'calls', -1)
    redis.call('HINCRBY', KEYS[1], 'cost', -cost)
  end
  if tenant and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DECRBY', KEYS[2], cost) end
  return 0
end
if run then
  local calls = tonumber(redis.call('HGET', KEYS[1], 'calls') or '0')
  local spent = tonumber(redis.call('HGET', KEYS[1], 'cost') or '0')
  if (maxCalls > 0 and calls + 1 > maxCalls) or (maxCost > 0 and spent + cost > maxCost) then return 1 end
end
if tenant then
  local spent = tonumber(redis.call('GET', KEYS[2]) or '0')
  if spent + cost > limit then return 2 end
end
if run then
  redis.call('HINCRBY', KEYS[1], 'calls', 1)
  redis.call('HINCRBY', KEYS[1], 'cost', cost)
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
if tenant then
  redis.call('INCRBY', KEYS[2], cost)
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return 0
