-- status: a status query answered from the stored state where it can be.
local done, r = settled()
if done then return done end
if r.state == 'P' and r.lease > NOW then
  audit('IN_PROGRESS', 'fresh', 'no')
  return answer('IN_PROGRESS', 'fresh', '', '', r.lease - NOW)
end
if r.state == 'P' then
  r.rec[R.state] = 'U'
  save(r.key, r.rec, r.n)
end
local lost = '0'
if r.lost then lost = '1' end
return {'P', r.tool, r.idem, r.fp, r.call, r.op, lost}
