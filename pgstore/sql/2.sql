-- pgstore schema, version 2.
--
-- append takes the tenant's head under an advisory lock of its own
-- before it updates the head row, instead of waiting on the row. Version
-- 1's UPDATE waited for the row's lock: under many agents of one tenant
-- the waiters queued on the row, and each, once the holder committed,
-- re-checked the row's newest version before updating it, which cost
-- Postgres more than the dispatch (docs/performance.md, "One tenant's
-- dispatches take turns"). An advisory lock queues them in the lock
-- manager and grants them one at a time, and the UPDATE that follows, a
-- statement of its own with a snapshot taken after the lock, finds the
-- row free. The lock is taken where the row's was, last
-- in every step, so no step waits for a head while holding one. Its key
-- space (two int4 keys) is apart from the steps' own (one int8 key); two
-- tenants whose ids hash alike, or one tenant's heads in two schemas of
-- a database, share a lock and take turns, which costs time, not truth.
CREATE OR REPLACE FUNCTION @S@.append(p_tenant bytea, p_body bytea, p_bsum text, p_code text, p_delivery text, p_side text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(1952918884, hashtext(encode(p_tenant, 'hex'))); -- 1952918884 is "tg-d" in ASCII
  LOOP
    WITH h AS (
      UPDATE @S@.heads SET prev = hash, seq = seq + 1,
          hash = encode(@C@.digest(hash || E'\n' || (seq + 1)::text || E'\n' || p_bsum || E'\n' || p_code || E'\n' || p_delivery || E'\n' || p_side, 'sha1'), 'hex')
        WHERE tenant = p_tenant RETURNING seq, prev, hash)
    INSERT INTO @S@.audit (tenant, seq, body, code, delivery, side, prev, hash)
      SELECT p_tenant, h.seq, p_body, p_code, p_delivery, p_side, h.prev, h.hash FROM h;
    GET DIAGNOSTICS n = ROW_COUNT;
    EXIT WHEN n > 0;
    -- The tenant's first record: its head, then again.
    INSERT INTO @S@.heads (tenant, seq, hash, prev) VALUES (p_tenant, 0, '', '') ON CONFLICT DO NOTHING;
  END LOOP;
END $$;
