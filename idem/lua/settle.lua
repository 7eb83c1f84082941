-- settle: the end of a status query on an unknown outcome, with what the
-- tool's receipt lookup said (RECEIPT: 'found' with DATA, 'absent', or ''
-- when inconclusive). K[1] is the original call's binding.
local done, r = settled()
if done then return done end
if RECEIPT == 'found' then
  audit('OK', 'receipt_reconciled', 'yes')
  if r.lost then
    -- Nothing is stored for a record the store lost: its fingerprint is
    -- unknown. A retry runs under the same downstream key and gets the
    -- same receipt from the downstream system.
    return answer('OK', 'receipt_reconciled', DATA, '')
  end
  r.rec[R.state], r.rec[R.data], r.rec[R.msg] = 'C', DATA, false
  save(r.key, r.rec, max(r.n, RN), TTL)
  kept(r.rec[R.token]) -- it ran: its budget charge stays
  if HAS_CALL then
    -- The record holds the result; the original call's binding links it,
    -- so that its call id answers only for the operation the record ran
    -- under.
    local b, bn = load(K[1])
    b[B.fp], b[B.code], b[B.data], b[B.msg], b[B.key] = r.fp, false, false, false, link()
    save(K[1], b, max(bn, B.key), TTL)
  end
  return answer('OK', 'receipt_reconciled', DATA, '')
end
if RECEIPT == 'absent' and (r.lost or (r.lease or 0) <= NOW) then
  -- The downstream system has no operation under the key, and the holder's
  -- lease is over: the operation did not take place. A re-execution reuses
  -- the same downstream key, so a late arrival of the first attempt is
  -- deduplicated downstream. The key is released.
  audit('NOT_FOUND', 'fresh', 'no')
  if not r.lost then
    giveback(r.rec[R.token]) -- it did not run: its budget charge goes back
    release(r.key)
  end
  return answer('NOT_FOUND', 'fresh', '', 'The operation did not take place: nothing was executed. It may be run again.')
end
audit('OUTCOME_UNKNOWN', 'fresh', 'no')
return answer('OUTCOME_UNKNOWN', 'fresh', '', '', 0, r.op)
