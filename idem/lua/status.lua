-- status: a status query answered from the stored state where it can be.
local r = record()
if not r then
  audit('NOT_FOUND', 'fresh', 'no')
  return answer('NOT_FOUND', 'fresh')
end
if r.state == 'C' then
  audit(r.code, 'local_replay', 'no')
  return answer(r.code, 'local_replay', r.data, r.msg)
end
if r.state == 'P' and r.lease > NOW then
  audit('IN_PROGRESS', 'fresh', 'no')
  return answer('IN_PROGRESS', 'fresh', '', '', r.lease - NOW)
end
if r.state == 'P' then redis.call('HSET', r.key, 'state', 'U') end
return {'P', r.tool, r.idem, r.fp, r.call, r.op}
