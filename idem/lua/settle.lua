-- settle: the end of a status query on an unknown outcome. ARGV[5] is 1 when
-- the receipt was found, ARGV[6] its data. KEYS[1] is the original call's binding.
local done, r = settled()
if done then return done end
if ARGV[5] ~= '1' then
  audit('OUTCOME_UNKNOWN', 'fresh', 'no')
  return answer('OUTCOME_UNKNOWN', 'fresh', '', '', 0, r.op)
end
redis.call('HSET', r.key, 'state', 'C', 'data', ARGV[6], 'msg', '')
redis.call('PEXPIRE', r.key, TTL)
if HAS_CALL then
  redis.call('HSET', KEYS[1], 'fp', r.fp, 'code', 'OK', 'data', ARGV[6], 'msg', '')
  redis.call('PEXPIRE', KEYS[1], TTL)
end
audit('OK', 'receipt_reconciled', 'yes')
return answer('OK', 'receipt_reconciled', ARGV[6], '')
