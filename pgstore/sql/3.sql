-- pgstore schema, version 3.
--
-- The empty operation id names no operation. A write with neither a call
-- id nor an operation id of the host's (it has an idempotency key) was
-- indexed under the empty id, and a status query that named no operation
-- then found it: the result of whichever such write came last, for a
-- query that named something else or nothing (internal/cases
-- TestStoresAgree found it; guard.MemStore did the same, idem never
-- did). index_record now writes no entry for the empty id, and the
-- entries version 1 and 2 wrote are deleted. find needs no change: with no
-- entry and no binding of the empty call id (bind never writes one), a
-- query that names no operation is answered from the record of its key,
-- when it names one, and only for an operation that ran under no id.
--
-- A call id names a write's operation only when the write ran under it.
-- A write's binding links its record, which answers only for the
-- operation id the write ran under; but precheck, replaying a retry of
-- the call id from that record, stored the answer on the binding too, and
-- from then on a status query naming the call id was answered with the
-- result of an operation the host had given an id of its own. precheck
-- now stores on the binding only an answer from another record than the
-- one it links, as idem does (guardtest
-- CallIDOfNamedOperationNamesNoOperation). settle, which found a write's
-- result from its receipt, stored it on the original call's binding too,
-- with the same effect: it now links the record instead. The answers
-- versions 1 and 2 stored so are taken off the bindings (below): each is
-- the committed result of the record the binding links, where a retry
-- still finds it.
ALTER FUNCTION @S@.index_record(bytea, bytea, bytea, bytea, bytea, bigint, bigint) RENAME TO index_record_1;

-- index_record is versions 1 and 2's (now index_record_1), for any
-- operation id but the empty one.
CREATE FUNCTION @S@.index_record(p_tenant bytea, p_subject bytea, p_op bytea, p_key bytea, p_call bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF length(p_op) > 0 THEN
    PERFORM @S@.index_record_1(p_tenant, p_subject, p_op, p_key, p_call, p_now, p_until);
  END IF;
END $$;

DELETE FROM @S@.ops WHERE length(op) = 0;

UPDATE @S@.bindings b SET code = NULL, data = NULL, msg = NULL
  FROM @S@.records r
  WHERE r.tenant = b.tenant AND r.subject = b.subject AND r.key = b.link
    AND r.state = 'C' AND r.fp = b.fp AND b.code = 'OK';

-- precheck is version 1's, but for the binding's update near its end.
CREATE OR REPLACE FUNCTION @S@.precheck(p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea, p_fp bytea,
  p_now bigint, p_until bigint, p_body bytea, p_bsum text, p_own @S@.records, p_read boolean,
  OUT decided boolean, OUT bound boolean, OUT a @S@.answer)
LANGUAGE plpgsql AS $$
DECLARE b @S@.bindings; r @S@.records; term boolean;
BEGIN
  decided := false; bound := false;
  IF length(p_call) > 0 THEN
    -- (No row lock: the step holds the call id's advisory lock, which
    -- every step that writes the binding takes.)
    SELECT * INTO b FROM @S@.bindings
      WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_call AND until_ms > p_now;
    IF FOUND THEN
      bound := true;
      IF b.fp <> p_fp THEN
        PERFORM @S@.append(p_tenant, p_body, p_bsum, 'CALL_ID_CONFLICT', 'fresh', 'no');
        decided := true; a := @S@.result('CALL_ID_CONFLICT', 'fresh', NULL, NULL, 0, NULL);
        RETURN;
      END IF;
      IF b.code IS NOT NULL THEN
        PERFORM @S@.append(p_tenant, p_body, p_bsum, b.code, 'local_replay', 'no');
        decided := true; a := @S@.result(b.code, 'local_replay', b.data, b.msg, 0, NULL);
        RETURN;
      END IF;
    END IF;
  END IF;
  -- The record to check: the one this call id already reserved (its own
  -- operation, whatever key the retry carries), else the key's.
  -- A record of another key is locked; the entry's own key is the
  -- step's advisory lock's.
  IF bound AND b.link IS NOT NULL AND b.link <> p_key THEN
    SELECT * INTO r FROM @S@.records
      WHERE tenant = p_tenant AND subject = p_subject AND key = b.link AND until_ms > p_now FOR UPDATE;
  END IF;
  IF (r.state IS NULL OR r.state = 'X') AND length(p_key) > 0 AND p_read THEN
    r := p_own;
  ELSIF (r.state IS NULL OR r.state = 'X') AND length(p_key) > 0 THEN
    SELECT * INTO r FROM @S@.records
      WHERE tenant = p_tenant AND subject = p_subject AND key = p_key AND until_ms > p_now;
  END IF;
  IF r.state IS NULL OR r.state = 'X' THEN
    RETURN;
  END IF;
  -- rule 7
  IF r.fp <> p_fp THEN
    a := @S@.result('IDEMPOTENCY_CONFLICT', 'fresh', NULL, NULL, 0, NULL);
  ELSIF r.state = 'C' THEN
    a := @S@.result('OK', 'local_replay', r.data, r.msg, 0, NULL);
  ELSIF r.state = 'P' AND r.lease_ms > p_now THEN
    a := @S@.result('IN_PROGRESS', 'fresh', NULL, NULL, r.lease_ms - p_now, NULL);
  ELSE
    a := @S@.result('OUTCOME_UNKNOWN', 'fresh', NULL, NULL, 0, r.op);
  END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, a.code, a.delivery, 'no');
  IF r.state = 'P' AND a.code = 'OUTCOME_UNKNOWN' THEN
    -- its holder's lease expired: never run blind again
    UPDATE @S@.records SET state = 'U' WHERE tenant = p_tenant AND subject = p_subject AND key = r.key;
  END IF;
  term := @S@.terminal(a.code);
  IF NOT bound THEN
    PERFORM @S@.bind(p_tenant, p_subject, p_call, p_fp, a.code, a.data, a.msg, p_until);
  ELSIF term AND (b.link IS NULL OR b.link <> r.key) THEN
    -- (an answer from the record the binding links is read there again:
    -- stored on the binding, it would answer a status query naming the
    -- call id for an operation that ran under another id)
    UPDATE @S@.bindings SET code = a.code, data = a.data, msg = a.msg
      WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_call;
  END IF;
  IF term AND length(p_call) > 0 THEN
    PERFORM @S@.index_call(p_tenant, p_subject, p_op, p_call, p_now, p_until);
  END IF;
  decided := true;
END $$;

-- settle is version 1's, but for the binding it writes on a found receipt.
CREATE OR REPLACE FUNCTION @S@.settle(p_locks bigint[], p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea,
  p_tool bytea, p_now bigint, p_until bigint, p_receipt integer, p_data bytea, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE s record; r @S@.records;
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  SELECT * INTO s FROM @S@.settled(p_tenant, p_op, p_key, p_tool, p_subject, p_now, p_body, p_bsum);
  IF s.decided THEN RETURN s.a; END IF;
  r := s.rec;
  IF p_receipt = 1 THEN
    PERFORM @S@.append(p_tenant, p_body, p_bsum, 'OK', 'receipt_reconciled', 'yes');
    IF s.lost THEN
      -- Nothing is stored for a lost record: its fingerprint is unknown.
      -- A retry runs under the same downstream key and gets the same receipt.
      RETURN @S@.result('OK', 'receipt_reconciled', p_data, NULL, 0, NULL);
    END IF;
    UPDATE @S@.records SET state = 'C', data = p_data, msg = NULL, until_ms = p_until
      WHERE tenant = p_tenant AND subject = p_subject AND key = r.key;
    PERFORM @S@.keep(p_tenant, r.token); -- it ran: its charge stays (rule 25)
    IF length(p_call) > 0 THEN
      -- The record holds the result; the original call's binding links
      -- it, so that its call id answers only for the operation the
      -- record ran under.
      INSERT INTO @S@.bindings AS b (tenant, subject, call_id, fp, code, data, msg, link, until_ms)
        VALUES (p_tenant, p_subject, p_call, r.fp, NULL, NULL, NULL, r.key, p_until)
        ON CONFLICT (tenant, subject, call_id) DO UPDATE SET fp = excluded.fp, code = NULL, data = NULL, msg = NULL,
          link = excluded.link, until_ms = excluded.until_ms;
    END IF;
    RETURN @S@.result('OK', 'receipt_reconciled', p_data, NULL, 0, NULL);
  ELSIF p_receipt = 2 AND (s.lost OR r.lease_ms <= p_now) THEN
    -- The lease is over and the downstream system has no operation under
    -- the key: it did not take place.
    PERFORM @S@.append(p_tenant, p_body, p_bsum, 'NOT_FOUND', 'fresh', 'no');
    IF NOT s.lost THEN
      PERFORM @S@.give_back(p_tenant, coalesce(r.token, ''::bytea), p_now, p_until); -- it did not run (rule 25)
      PERFORM @S@.release(p_tenant, p_subject, r.key, ''::bytea, p_op, p_now, p_until);
    END IF;
    RETURN @S@.result('NOT_FOUND', 'fresh', NULL, convert_to('The operation did not take place: nothing was executed. It may be run again.', 'UTF8'), 0, NULL);
  END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, 'OUTCOME_UNKNOWN', 'fresh', 'no');
  RETURN @S@.result('OUTCOME_UNKNOWN', 'fresh', NULL, NULL, 0, CASE WHEN r.key IS NULL THEN p_op ELSE r.op END);
END $$;
