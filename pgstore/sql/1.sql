-- pgstore schema, version 1. @S@ is the store's schema and @C@ the schema
-- that holds pgcrypto (its digest gives the audit chain's SHA-1), both
-- quoted by the store. The rules are memstore's (memstore/doc.go), which
-- the comments name by number; every function below is one store step,
-- run as one transaction of its own or inside a transactional write's.
--
-- Every string that comes from a call (ids, keys, tool names, data,
-- messages, audit bodies) is bytea: a valid id may hold a NUL, which text
-- refuses, and the database's encoding must not matter. Times are the
-- guard's clock in milliseconds; until_ms is when a row may be forgotten
-- (retention: lookups ignore rows past it, the sweep deletes them).

CREATE TABLE @S@.bindings ( -- rule 2
  tenant   bytea  NOT NULL,
  subject  bytea  NOT NULL,
  call_id  bytea  NOT NULL,
  fp       bytea  NOT NULL,
  code     text,            -- the terminal result, NULL when none is stored
  data     bytea,
  msg      bytea,
  link     bytea,           -- the effective key its write reserved, NULL for none
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, subject, call_id)
) WITH (fillfactor = 80);

CREATE TABLE @S@.records ( -- rule 3
  tenant   bytea  NOT NULL,
  subject  bytea  NOT NULL,
  key      bytea  NOT NULL,
  state    text   NOT NULL, -- P reserved, C committed, U unknown, X released (a tombstone)
  fp       bytea,
  data     bytea,
  msg      bytea,
  op       bytea,
  lease_ms bigint NOT NULL DEFAULT 0,
  token    bytea,
  tool     bytea,
  call_id  bytea,
  done     bytea,           -- the token whose commit wrote this C or U (rule 14)
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, subject, key)
) WITH (fillfactor = 80);

CREATE TABLE @S@.ops ( -- rule 4
  tenant   bytea  NOT NULL,
  subject  bytea  NOT NULL,
  op       bytea  NOT NULL,
  kind     text   NOT NULL, -- k: a record (ref its key), c: a call binding (ref its call id), n: nothing ran
  ref      bytea,
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, subject, op)
) WITH (fillfactor = 80);

CREATE TABLE @S@.commits ( -- rule 14: what a token's first commit answered when it wrote no record of its own
  tenant   bytea  NOT NULL,
  subject  bytea  NOT NULL,
  token    bytea  NOT NULL,
  code     text   NOT NULL,
  delivery text   NOT NULL,
  data     bytea,
  msg      bytea,
  retry_ms bigint NOT NULL,
  op       bytea,
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, subject, token)
);

CREATE TABLE @S@.grants ( -- rule 22: the key of the operation each grant paid for
  tenant   bytea  NOT NULL,
  subject  bytea  NOT NULL,
  grant_id bytea  NOT NULL,
  key      bytea  NOT NULL,
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, subject, grant_id)
);

CREATE TABLE @S@.audit ( -- rule 5
  tenant   bytea  NOT NULL,
  seq      bigint NOT NULL,
  body     bytea  NOT NULL,
  code     text   NOT NULL,
  delivery text   NOT NULL,
  side     text   NOT NULL,
  prev     text   NOT NULL,
  hash     text   NOT NULL,
  PRIMARY KEY (tenant, seq)
);

CREATE TABLE @S@.heads ( -- rule 5: each tenant's last record, locked by every append
  tenant bytea  PRIMARY KEY,
  seq    bigint NOT NULL,
  hash   text   NOT NULL,
  prev   text   NOT NULL  -- the hash before it: the last record's prev
) WITH (fillfactor = 50);

CREATE TABLE @S@.budget_runs ( -- rule 23
  tenant   bytea  NOT NULL,
  scope    bytea  NOT NULL,
  tool     bytea  NOT NULL,
  calls    bigint NOT NULL,
  cost     bigint NOT NULL,
  until_ms bigint NOT NULL,
  PRIMARY KEY (tenant, scope, tool)
) WITH (fillfactor = 80);

CREATE TABLE @S@.budget_periods ( -- rule 23
  tenant   bytea  NOT NULL,
  start_ms bigint NOT NULL,
  cost     bigint NOT NULL,
  end_ms   bigint NOT NULL,
  PRIMARY KEY (tenant, start_ms)
) WITH (fillfactor = 80);

CREATE TABLE @S@.budget_charges ( -- rule 24: what each token took
  tenant       bytea   NOT NULL,
  token        bytea   NOT NULL,
  returned     boolean NOT NULL,
  scope        bytea,
  tool         bytea,
  cost         bigint  NOT NULL DEFAULT 0,
  period_ms    bigint  NOT NULL DEFAULT 0,
  tenant_limit bigint  NOT NULL DEFAULT 0,
  until_ms     bigint  NOT NULL,
  PRIMARY KEY (tenant, token)
);

-- settles: the row a settlement writes so that its commit waits for the
-- synchronous standbys, whose WAL then holds every earlier commit.
CREATE TABLE @S@.settles (
  id integer PRIMARY KEY,
  n  bigint  NOT NULL
);
INSERT INTO @S@.settles VALUES (1, 0);

-- answer is what every step returns: kind R (a result: code, delivery,
-- data, msg, retry_ms, op), T (reserved now), H (a reservation of the
-- token stood already), B (the budget refused: retry_ms is the verdict),
-- P (pending: the record's tool, key, fp, call_id, op, and lost), E (an
-- operator's resolution refused: code names why).
CREATE TYPE @S@.answer AS (
  kind     text,
  code     text,
  delivery text,
  data     bytea,
  msg      bytea,
  retry_ms bigint,
  op       bytea,
  tool     bytea,
  key      bytea,
  fp       bytea,
  call_id  bytea,
  lost     boolean,
  xid      text
);

CREATE FUNCTION @S@.result(p_code text, p_delivery text, p_data bytea, p_msg bytea, p_retry bigint, p_op bytea)
RETURNS @S@.answer LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW('R', p_code, p_delivery, p_data, p_msg, p_retry, p_op, NULL, NULL, NULL, NULL, false, NULL)::@S@.answer
$$;

CREATE FUNCTION @S@.terminal(p_code text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT p_code IN ('OK', 'NOT_FOUND', 'UNKNOWN_TOOL', 'INVALID_ARGUMENTS', 'IDEMPOTENCY_CONFLICT', 'CALL_ID_CONFLICT')
$$;

-- Every step first takes its advisory locks (one per call id, key,
-- operation id and grant it touches), in the order the store gave them:
-- it sorts them, so no two steps wait for each other. They hold until the
-- transaction ends: a transactional write's key stays locked while its
-- tool runs, and a duplicate waits for its commit.

-- append adds the step's audit record to the tenant's chain (rule 5),
-- under the tenant's head row, locked until the transaction ends: appends
-- of one tenant take turns. Every step appends last, after every other
-- lock it takes, so no step waits for a head while holding one.
CREATE FUNCTION @S@.append(p_tenant bytea, p_body bytea, p_bsum text, p_code text, p_delivery text, p_side text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  LOOP
    -- One statement locks the head, links the record to it, advances it
    -- and inserts the record: SET reads the row as it was (prev := the old
    -- hash), RETURNING gives it as it is now.
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

-- bind binds a call id not yet bound to the fingerprint, with the result
-- if it is terminal (rule 9); an expired binding is replaced.
CREATE FUNCTION @S@.bind(p_tenant bytea, p_subject bytea, p_call bytea, p_fp bytea, p_code text, p_data bytea, p_msg bytea, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE term boolean := @S@.terminal(p_code);
BEGIN
  IF length(p_call) = 0 THEN RETURN; END IF;
  INSERT INTO @S@.bindings AS b (tenant, subject, call_id, fp, code, data, msg, link, until_ms)
    VALUES (p_tenant, p_subject, p_call, p_fp,
      CASE WHEN term THEN p_code END, CASE WHEN term THEN p_data END, CASE WHEN term THEN p_msg END, NULL, p_until)
    ON CONFLICT (tenant, subject, call_id) DO UPDATE SET fp = excluded.fp, code = excluded.code, data = excluded.data,
      msg = excluded.msg, link = NULL, until_ms = excluded.until_ms;
END $$;

-- index_call points the operation id at the call binding, unless the
-- index names something already (rule 4). For an operation named after
-- its call the entry would name what a status query finds without it (the
-- binding of the call whose id is the operation id: find), so none is
-- written: one that would be replaced is deleted instead.
CREATE FUNCTION @S@.index_call(p_tenant bytea, p_subject bytea, p_op bytea, p_call bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_op = p_call THEN
    DELETE FROM @S@.ops WHERE tenant = p_tenant AND subject = p_subject AND op = p_op AND (until_ms <= p_now OR kind = 'n');
    RETURN;
  END IF;
  -- The entry an operation named after its call has without one: its
  -- binding, when it holds a result or links a record.
  IF EXISTS (SELECT 1 FROM @S@.bindings WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_op
      AND until_ms > p_now AND (code IS NOT NULL OR link IS NOT NULL)) THEN
    RETURN;
  END IF;
  INSERT INTO @S@.ops AS x (tenant, subject, op, kind, ref, until_ms) VALUES (p_tenant, p_subject, p_op, 'c', p_call, p_until)
    ON CONFLICT (tenant, subject, op) DO UPDATE SET kind = 'c', ref = excluded.ref, until_ms = excluded.until_ms
    WHERE x.until_ms <= p_now OR x.kind = 'n';
END $$;

-- never marks the operation as one of which nothing ran, unless the index
-- names something already; an operation named after its call needs no
-- mark (rule 4).
CREATE FUNCTION @S@.never(p_tenant bytea, p_subject bytea, p_op bytea, p_call bytea, p_key bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_op = p_call OR length(p_key) = 0 THEN RETURN; END IF;
  -- An operation named after a call has an entry already: its binding
  -- (index_call).
  IF EXISTS (SELECT 1 FROM @S@.bindings WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_op
      AND until_ms > p_now AND (code IS NOT NULL OR link IS NOT NULL)) THEN
    RETURN;
  END IF;
  INSERT INTO @S@.ops AS x (tenant, subject, op, kind, ref, until_ms) VALUES (p_tenant, p_subject, p_op, 'n', NULL, p_until)
    ON CONFLICT (tenant, subject, op) DO UPDATE SET kind = 'n', ref = NULL, until_ms = excluded.until_ms
    WHERE x.until_ms <= p_now;
END $$;

-- index_record points the operation id at the record of p_key, unless it
-- names another record still stored: the first operation keeps its id
-- (rule 4). For an operation named after its call (p_call), whose binding
-- links the record or holds its result, an entry that would be replaced is
-- deleted instead, as index_call does.
CREATE FUNCTION @S@.index_record(p_tenant bytea, p_subject bytea, p_op bytea, p_key bytea, p_call bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_op = p_call AND length(p_call) > 0 THEN
    DELETE FROM @S@.ops x WHERE x.tenant = p_tenant AND x.subject = p_subject AND x.op = p_op
      AND NOT (x.until_ms > p_now AND x.kind = 'k' AND x.ref <> p_key AND EXISTS (
        SELECT 1 FROM @S@.records r WHERE r.tenant = p_tenant AND r.subject = p_subject AND r.key = x.ref AND r.until_ms > p_now));
    RETURN;
  END IF;
  -- An operation named after a call whose binding links another record
  -- still stored keeps it (index_call).
  IF EXISTS (SELECT 1 FROM @S@.bindings b WHERE b.tenant = p_tenant AND b.subject = p_subject AND b.call_id = p_op
      AND b.until_ms > p_now AND b.link IS NOT NULL AND b.link <> p_key AND EXISTS (
        SELECT 1 FROM @S@.records r WHERE r.tenant = p_tenant AND r.subject = p_subject AND r.key = b.link AND r.until_ms > p_now))
      AND NOT EXISTS (SELECT 1 FROM @S@.ops x WHERE x.tenant = p_tenant AND x.subject = p_subject AND x.op = p_op AND x.until_ms > p_now) THEN
    RETURN;
  END IF;
  INSERT INTO @S@.ops AS x (tenant, subject, op, kind, ref, until_ms) VALUES (p_tenant, p_subject, p_op, 'k', p_key, p_until)
    ON CONFLICT (tenant, subject, op) DO UPDATE SET kind = 'k', ref = excluded.ref, until_ms = excluded.until_ms
    WHERE NOT (x.until_ms > p_now AND x.kind = 'k' AND x.ref <> p_key AND EXISTS (
      SELECT 1 FROM @S@.records r WHERE r.tenant = p_tenant AND r.subject = p_subject AND r.key = x.ref AND r.until_ms > p_now));
END $$;

-- release frees a reserved key (rules 13, 16): released by a token (a
-- commit) it becomes that token's tombstone, which refuses a late copy of
-- the reservation; without one (a status query) it is deleted. The index
-- entry of the step's operation naming it then says nothing ran.
CREATE FUNCTION @S@.release(p_tenant bytea, p_subject bytea, p_key bytea, p_token bytea, p_op bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF length(p_token) > 0 THEN
    INSERT INTO @S@.records AS r (tenant, subject, key, state, token, until_ms) VALUES (p_tenant, p_subject, p_key, 'X', p_token, p_until)
      ON CONFLICT (tenant, subject, key) DO UPDATE SET state = 'X', fp = NULL, data = NULL, msg = NULL, op = NULL, lease_ms = 0,
        token = excluded.token, tool = NULL, call_id = NULL, done = NULL, until_ms = excluded.until_ms;
  ELSE
    DELETE FROM @S@.records WHERE tenant = p_tenant AND subject = p_subject AND key = p_key;
  END IF;
  UPDATE @S@.ops SET kind = 'n', ref = NULL
    WHERE tenant = p_tenant AND subject = p_subject AND op = p_op AND kind = 'k' AND ref = p_key AND until_ms > p_now;
END $$;

-- precheck applies checks 1 and 2 of the contract (rules 6 to 9). When
-- they decide the answer it is audited and returned with decided set;
-- otherwise nothing changed, and bound says whether the call id was bound.
-- p_read says that p_own is the record of p_key the step read already
-- (a row of NULLs for none), so it is not read again.
CREATE FUNCTION @S@.precheck(p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea, p_fp bytea,
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
  ELSIF term THEN
    UPDATE @S@.bindings SET code = a.code, data = a.data, msg = a.msg
      WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_call;
  END IF;
  IF term AND length(p_call) > 0 THEN
    PERFORM @S@.index_call(p_tenant, p_subject, p_op, p_call, p_now, p_until);
  END IF;
  decided := true;
END $$;

-- finish records a dispatch that reserved nothing (rule 10).
CREATE FUNCTION @S@.finish(p_locks bigint[], p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea,
  p_tool bytea, p_fp bytea, p_now bigint, p_until bigint, p_code text, p_data bytea, p_msg bytea, p_retry bigint,
  p_side text, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE pc record; term boolean := @S@.terminal(p_code);
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  -- A call id bound now, with no key: the checks have nothing to find.
  -- The binding is made first, and the rest follows in the same step.
  IF length(p_call) > 0 AND length(p_key) = 0 THEN
    INSERT INTO @S@.bindings (tenant, subject, call_id, fp, code, data, msg, until_ms)
      VALUES (p_tenant, p_subject, p_call, p_fp, CASE WHEN term THEN p_code END, CASE WHEN term THEN p_data END,
        CASE WHEN term THEN p_msg END, p_until)
      ON CONFLICT DO NOTHING;
    IF FOUND THEN
      PERFORM @S@.append(p_tenant, p_body, p_bsum, p_code, 'fresh', p_side);
      IF term THEN
        PERFORM @S@.index_call(p_tenant, p_subject, p_op, p_call, p_now, p_until);
      ELSE
        PERFORM @S@.never(p_tenant, p_subject, p_op, p_call, p_key, p_now, p_until);
      END IF;
      RETURN @S@.result(p_code, 'fresh', p_data, p_msg, p_retry, NULL);
    END IF;
  END IF;
  SELECT * INTO pc FROM @S@.precheck(p_tenant, p_subject, p_call, p_op, p_key, p_fp, p_now, p_until, p_body, p_bsum, NULL, false);
  IF pc.decided THEN RETURN pc.a; END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, p_code, 'fresh', p_side);
  IF NOT pc.bound THEN
    PERFORM @S@.bind(p_tenant, p_subject, p_call, p_fp, p_code, p_data, p_msg, p_until);
  ELSIF term THEN
    UPDATE @S@.bindings SET code = p_code, data = p_data, msg = p_msg
      WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_call;
  END IF;
  IF p_code = 'OK' AND length(p_key) > 0 THEN
    INSERT INTO @S@.records AS r (tenant, subject, key, state, fp, data, msg, op, tool, call_id, until_ms)
      VALUES (p_tenant, p_subject, p_key, 'C', p_fp, p_data, p_msg, p_op, p_tool, p_call, p_until)
      ON CONFLICT (tenant, subject, key) DO UPDATE SET state = 'C', fp = excluded.fp, data = excluded.data, msg = excluded.msg,
        op = excluded.op, tool = excluded.tool, call_id = excluded.call_id, until_ms = excluded.until_ms,
        token = CASE WHEN r.until_ms > p_now THEN r.token END, lease_ms = CASE WHEN r.until_ms > p_now THEN r.lease_ms ELSE 0 END;
    PERFORM @S@.index_record(p_tenant, p_subject, p_op, p_key, p_call, p_now, p_until);
  ELSIF term AND length(p_call) > 0 THEN
    PERFORM @S@.index_call(p_tenant, p_subject, p_op, p_call, p_now, p_until);
  ELSIF NOT term THEN
    PERFORM @S@.never(p_tenant, p_subject, p_op, p_call, p_key, p_now, p_until);
  END IF;
  RETURN @S@.result(p_code, 'fresh', p_data, p_msg, p_retry, NULL);
END $$;

-- take takes a charge under its token if every bound has room (rule 23);
-- a token that took its charge before takes nothing more (rule 24). It
-- returns 0 (taken), 1 (the run's bound has no room), 2 (the tenant's), or
-- 3 (the token's charge was given back: it stays spent).
CREATE FUNCTION @S@.take(p_tenant bytea, p_token bytea, p_now bigint, p_until bigint, p_scope bytea, p_tool bytea,
  p_cost bigint, p_max_calls bigint, p_max_cost bigint, p_limit bigint, p_pstart bigint, p_pend bigint)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE ch @S@.budget_charges; run @S@.budget_runs; per @S@.budget_periods;
BEGIN
  SELECT * INTO ch FROM @S@.budget_charges WHERE tenant = p_tenant AND token = p_token AND until_ms > p_now FOR UPDATE;
  IF FOUND THEN
    IF ch.returned THEN RETURN 3; END IF;
    RETURN 0;
  END IF;
  IF length(p_scope) > 0 THEN
    INSERT INTO @S@.budget_runs (tenant, scope, tool, calls, cost, until_ms) VALUES (p_tenant, p_scope, p_tool, 0, 0, p_until)
      ON CONFLICT DO NOTHING;
    SELECT * INTO run FROM @S@.budget_runs WHERE tenant = p_tenant AND scope = p_scope AND tool = p_tool FOR UPDATE;
    IF run.until_ms <= p_now THEN run.calls := 0; run.cost := 0; END IF; -- forgotten (rule 26)
    IF (p_max_calls > 0 AND run.calls + 1 > p_max_calls) OR (p_max_cost > 0 AND run.cost + p_cost > p_max_cost) THEN
      RETURN 1;
    END IF;
  END IF;
  IF p_limit > 0 THEN
    INSERT INTO @S@.budget_periods (tenant, start_ms, cost, end_ms) VALUES (p_tenant, p_pstart, 0, p_pend) ON CONFLICT DO NOTHING;
    SELECT * INTO per FROM @S@.budget_periods WHERE tenant = p_tenant AND start_ms = p_pstart FOR UPDATE;
    IF per.cost + p_cost > p_limit THEN
      RETURN 2;
    END IF;
  END IF;
  IF length(p_scope) > 0 THEN
    UPDATE @S@.budget_runs SET calls = run.calls + 1, cost = run.cost + p_cost, until_ms = p_until
      WHERE tenant = p_tenant AND scope = p_scope AND tool = p_tool;
  END IF;
  IF p_limit > 0 THEN
    UPDATE @S@.budget_periods SET cost = per.cost + p_cost WHERE tenant = p_tenant AND start_ms = p_pstart;
  END IF;
  INSERT INTO @S@.budget_charges AS c (tenant, token, returned, scope, tool, cost, period_ms, tenant_limit, until_ms)
    VALUES (p_tenant, p_token, false, p_scope, p_tool, p_cost, p_pstart, p_limit, p_until)
    ON CONFLICT (tenant, token) DO UPDATE SET returned = false, scope = excluded.scope, tool = excluded.tool, cost = excluded.cost,
      period_ms = excluded.period_ms, tenant_limit = excluded.tenant_limit, until_ms = excluded.until_ms;
  RETURN 0;
END $$;

-- give_back gives back what the token took, once (rule 25): it stays
-- spent, so a late copy of its charge takes nothing.
CREATE FUNCTION @S@.give_back(p_tenant bytea, p_token bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE ch @S@.budget_charges;
BEGIN
  IF length(p_token) = 0 THEN RETURN; END IF;
  SELECT * INTO ch FROM @S@.budget_charges WHERE tenant = p_tenant AND token = p_token AND until_ms > p_now FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO @S@.budget_charges AS c (tenant, token, returned, until_ms) VALUES (p_tenant, p_token, true, p_until)
      ON CONFLICT (tenant, token) DO UPDATE SET returned = true, scope = NULL, tool = NULL, cost = 0, period_ms = 0,
        tenant_limit = 0, until_ms = excluded.until_ms;
    RETURN;
  END IF;
  IF ch.returned THEN RETURN; END IF;
  UPDATE @S@.budget_charges SET returned = true WHERE tenant = p_tenant AND token = p_token;
  IF length(ch.scope) > 0 THEN
    UPDATE @S@.budget_runs SET calls = calls - 1, cost = cost - ch.cost
      WHERE tenant = p_tenant AND scope = ch.scope AND tool = ch.tool;
  END IF;
  IF ch.tenant_limit > 0 THEN
    UPDATE @S@.budget_periods SET cost = cost - ch.cost WHERE tenant = p_tenant AND start_ms = ch.period_ms;
  END IF;
END $$;

-- keep forgets a token whose charge stays taken for good (rule 25).
CREATE FUNCTION @S@.keep(p_tenant bytea, p_token bytea) RETURNS void LANGUAGE sql AS $$
  DELETE FROM @S@.budget_charges WHERE tenant = p_tenant AND token = p_token
$$;

-- refuse answers a reservation its grant (rule 22) or its budget (rule
-- 24) refused: audited, a new call id bound to the fingerprint alone (the
-- code is not terminal), the operation marked as one of which nothing ran.
CREATE FUNCTION @S@.refuse(p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea, p_fp bytea,
  p_now bigint, p_until bigint, p_bound boolean, p_code text, p_body bytea, p_bsum text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM @S@.append(p_tenant, p_body, p_bsum, p_code, 'fresh', 'no');
  IF NOT p_bound THEN
    PERFORM @S@.bind(p_tenant, p_subject, p_call, p_fp, p_code, NULL, NULL, p_until);
  END IF;
  PERFORM @S@.never(p_tenant, p_subject, p_op, p_call, p_key, p_now, p_until);
END $$;

-- reserve applies rules 11, 12, 22 and 24: a write about to execute.
-- p_charge says whether the entry carries a budget charge (its fields
-- follow); p_xid asks for the transaction's id (a transactional write's).
CREATE FUNCTION @S@.reserve(p_locks bigint[], p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea,
  p_tool bytea, p_fp bytea, p_now bigint, p_until bigint, p_lease bigint, p_token bytea, p_grant bytea, p_grant_until bigint,
  p_charge boolean, p_scope bytea, p_ctool bytea, p_cost bigint, p_max_calls bigint, p_max_cost bigint, p_limit bigint,
  p_pstart bigint, p_pend bigint, p_xid boolean, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE own @S@.records; pc record; g bytea; v integer; a @S@.answer; spent boolean := false;
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  -- rule 12: idempotent per token (the key's advisory lock is held)
  SELECT * INTO own FROM @S@.records
    WHERE tenant = p_tenant AND subject = p_subject AND key = p_key AND until_ms > p_now;
  IF FOUND AND own.token = p_token THEN
    IF own.state = 'P' THEN
      a := @S@.result(NULL, NULL, NULL, NULL, 0, NULL); a.kind := 'H';
      RETURN a;
    END IF;
    RETURN @S@.result('UNAVAILABLE', 'fresh', NULL, NULL, 0, NULL);
  END IF;
  SELECT * INTO pc FROM @S@.precheck(p_tenant, p_subject, p_call, p_op, p_key, p_fp, p_now, p_until, p_body, p_bsum, own, true);
  IF pc.decided THEN RETURN pc.a; END IF;
  -- rule 22: a grant spent on another operation approves nothing here.
  -- With a charge it is checked first and spent after the charge; without
  -- one, checked and spent in one statement (below).
  IF length(p_grant) > 0 AND p_charge THEN
    SELECT key INTO g FROM @S@.grants
      WHERE tenant = p_tenant AND subject = p_subject AND grant_id = p_grant AND until_ms > p_now;
    spent := FOUND AND g <> p_key;
  END IF;
  -- rule 24: the charge, after every check that answers from the store
  IF p_charge AND NOT spent THEN
    v := @S@.take(p_tenant, p_token, p_now, p_until, p_scope, p_ctool, p_cost, p_max_calls, p_max_cost, p_limit, p_pstart, p_pend);
    IF v = 3 THEN
      -- a late copy of a reservation released by its token, whose
      -- tombstone is gone: it reserves nothing
      RETURN @S@.result('UNAVAILABLE', 'fresh', NULL, NULL, 0, NULL);
    ELSIF v > 0 THEN
      PERFORM @S@.refuse(p_tenant, p_subject, p_call, p_op, p_key, p_fp, p_now, p_until, pc.bound, 'BUDGET_EXHAUSTED', p_body, p_bsum);
      a := @S@.result('BUDGET_EXHAUSTED', 'fresh', NULL, NULL, v, NULL); a.kind := 'B';
      RETURN a;
    END IF;
  END IF;
  IF length(p_grant) > 0 AND NOT spent THEN
    -- A grant stored for another key, until it is forgotten, stays as it is.
    INSERT INTO @S@.grants AS x (tenant, subject, grant_id, key, until_ms) VALUES (p_tenant, p_subject, p_grant, p_key, p_grant_until)
      ON CONFLICT (tenant, subject, grant_id) DO UPDATE SET key = excluded.key, until_ms = excluded.until_ms
      WHERE x.until_ms <= p_now OR x.key = p_key;
    spent := NOT FOUND;
  END IF;
  IF spent THEN
    PERFORM @S@.refuse(p_tenant, p_subject, p_call, p_op, p_key, p_fp, p_now, p_until, pc.bound, 'APPROVAL_INVALID', p_body, p_bsum);
    RETURN @S@.result('APPROVAL_INVALID', 'fresh', NULL, NULL, 0, NULL); -- the store words it: guard.GrantUsedMessage
  END IF;
  -- Link the call id to the record it reserves: a retry of this call id is
  -- answered from this operation whatever key or operation id it carries.
  IF length(p_call) > 0 THEN
    IF pc.bound THEN
      UPDATE @S@.bindings SET link = p_key WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_call;
    ELSE
      INSERT INTO @S@.bindings AS b (tenant, subject, call_id, fp, link, until_ms) VALUES (p_tenant, p_subject, p_call, p_fp, p_key, p_until)
        ON CONFLICT (tenant, subject, call_id) DO UPDATE SET fp = excluded.fp, code = NULL, data = NULL, msg = NULL,
          link = excluded.link, until_ms = excluded.until_ms;
    END IF;
  END IF;
  INSERT INTO @S@.records AS r (tenant, subject, key, state, fp, op, lease_ms, token, tool, call_id, until_ms)
    VALUES (p_tenant, p_subject, p_key, 'P', p_fp, p_op, p_now + p_lease, p_token, p_tool, p_call, p_until)
    ON CONFLICT (tenant, subject, key) DO UPDATE SET state = 'P', fp = excluded.fp, data = NULL, msg = NULL, op = excluded.op,
      lease_ms = excluded.lease_ms, token = excluded.token, tool = excluded.tool, call_id = excluded.call_id, done = NULL,
      until_ms = excluded.until_ms;
  PERFORM @S@.index_record(p_tenant, p_subject, p_op, p_key, p_call, p_now, p_until);
  a := @S@.result(NULL, NULL, NULL, NULL, 0, NULL); a.kind := 'T';
  IF p_xid THEN a.xid := pg_current_xact_id()::text; END IF;
  RETURN a;
END $$;

-- commit stores the outcome of the write reserved under p_token (rules 13
-- and 14), with its audit record.
CREATE FUNCTION @S@.commit(p_locks bigint[], p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea,
  p_tool bytea, p_fp bytea, p_now bigint, p_until bigint, p_token bytea, p_code text, p_data bytea, p_msg bytea,
  p_retry bigint, p_side text, p_charge boolean, p_grant bytea, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE m @S@.commits; k @S@.records; a @S@.answer; side text := p_side; store text := ''; term boolean; mine boolean;
BEGIN
  -- the step's locks, in the array's order; none in a transactional
  -- write's transaction, whose reservation holds them
  IF cardinality(p_locks) > 0 THEN
    PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk;
  END IF;
  SELECT * INTO k FROM @S@.records -- (the key's advisory lock is held)
    WHERE tenant = p_tenant AND subject = p_subject AND key = p_key AND until_ms > p_now;
  -- rule 14: a retry of this very commit answers as the first did. A
  -- first commit that wrote the record left its token there (done);
  -- otherwise beside it (commits).
  IF k.done = p_token THEN
    IF k.state = 'C' AND k.fp = p_fp THEN
      RETURN @S@.result('OK', 'fresh', k.data, k.msg, 0, NULL);
    END IF;
    RETURN @S@.result(p_code, 'fresh', p_data, p_msg, p_retry, CASE WHEN p_code = 'OUTCOME_UNKNOWN' THEN p_op END);
  END IF;
  -- The fresh path: this token's reservation stands (so no commit of it
  -- came before). Its reserve bound the call id to this intent and linked
  -- it to the record, which keeps the outcome: the binding is not written
  -- again.
  mine := k.state = 'P' AND k.token = p_token;
  IF NOT mine THEN
    SELECT * INTO m FROM @S@.commits WHERE tenant = p_tenant AND subject = p_subject AND token = p_token AND until_ms > p_now;
    IF FOUND THEN
      RETURN @S@.result(m.code, m.delivery, m.data, m.msg, m.retry_ms, m.op);
    END IF;
  END IF;
  a := @S@.result(p_code, 'fresh', p_data, p_msg, p_retry, NULL);
  IF k.state = 'C' AND k.fp = p_fp THEN
    -- Settled meanwhile from a receipt: the stored result stands, and the
    -- side effect was already audited by the status query.
    a := @S@.result('OK', 'local_replay', k.data, k.msg, 0, NULL);
    side := 'no';
  ELSIF k.state IS NOT NULL AND k.state <> 'X' AND k.fp <> p_fp THEN
    -- The key now belongs to another intent: never overwrite it. Our
    -- outcome is still reported and audited.
    IF a.code = 'OK' THEN a.code := 'OUTCOME_UNKNOWN'; a.data := NULL; a.msg := NULL; END IF;
  ELSIF p_code = 'OK' THEN
    store := 'C';
  ELSIF p_code = 'OUTCOME_UNKNOWN' THEN
    store := 'U';
  ELSIF k.state IS NULL OR k.state = 'X' OR k.token = p_token THEN
    -- Not started: free the key (ours, or none stored: a reservation
    -- whose reply was lost may still arrive, and the tombstone refuses it).
    store := 'X';
  END IF;
  IF a.code = 'OUTCOME_UNKNOWN' THEN a.op := p_op; END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, a.code, a.delivery, side);
  IF store = 'C' OR store = 'U' THEN
    INSERT INTO @S@.records AS r (tenant, subject, key, state, fp, data, msg, op, tool, call_id, done, until_ms)
      VALUES (p_tenant, p_subject, p_key, store, p_fp, CASE WHEN store = 'C' THEN a.data END, CASE WHEN store = 'C' THEN a.msg END,
        p_op, p_tool, p_call, p_token, p_until)
      ON CONFLICT (tenant, subject, key) DO UPDATE SET state = excluded.state, fp = excluded.fp,
        data = CASE WHEN excluded.state = 'C' THEN excluded.data ELSE r.data END,
        msg = CASE WHEN excluded.state = 'C' THEN excluded.msg ELSE r.msg END,
        op = excluded.op, tool = excluded.tool, call_id = excluded.call_id, done = excluded.done, until_ms = excluded.until_ms;
  ELSIF store = 'X' THEN
    PERFORM @S@.release(p_tenant, p_subject, p_key, p_token, p_op, p_now, p_until);
    -- The write did not start: the grant it spent paid for nothing (rule 22).
    IF length(p_grant) > 0 THEN
      DELETE FROM @S@.grants WHERE tenant = p_tenant AND subject = p_subject AND grant_id = p_grant AND key = p_key;
    END IF;
  END IF;
  -- rule 25: the reservation's charge
  IF p_charge THEN
    IF p_side = 'no' THEN
      PERFORM @S@.give_back(p_tenant, p_token, p_now, p_until);
    ELSIF store = 'C' THEN
      PERFORM @S@.keep(p_tenant, p_token);
    END IF;
  END IF;
  IF length(p_call) > 0 AND NOT (mine AND store IN ('C', 'U')) THEN
    term := @S@.terminal(a.code);
    INSERT INTO @S@.bindings AS b (tenant, subject, call_id, fp, code, data, msg, until_ms)
      VALUES (p_tenant, p_subject, p_call, p_fp, CASE WHEN term THEN a.code END, CASE WHEN term THEN a.data END,
        CASE WHEN term THEN a.msg END, p_until)
      ON CONFLICT (tenant, subject, call_id) DO UPDATE SET fp = excluded.fp,
        code = CASE WHEN term THEN excluded.code WHEN b.until_ms > p_now THEN b.code END,
        data = CASE WHEN term THEN excluded.data WHEN b.until_ms > p_now THEN b.data END,
        msg = CASE WHEN term THEN excluded.msg WHEN b.until_ms > p_now THEN b.msg END,
        link = CASE WHEN b.until_ms > p_now THEN b.link END, until_ms = excluded.until_ms;
  END IF;
  IF store NOT IN ('C', 'U') THEN
    INSERT INTO @S@.commits (tenant, subject, token, code, delivery, data, msg, retry_ms, op, until_ms)
      VALUES (p_tenant, p_subject, p_token, a.code, a.delivery, a.data, a.msg, a.retry_ms, a.op, p_until)
      ON CONFLICT (tenant, subject, token) DO UPDATE SET code = excluded.code, delivery = excluded.delivery, data = excluded.data,
        msg = excluded.msg, retry_ms = excluded.retry_ms, op = excluded.op, until_ms = excluded.until_ms;
  END IF;
  RETURN a;
END $$;

-- find reads the operation a status query names (rule 15): the record or
-- binding its operation id is indexed to; else the binding of the call
-- whose id is the operation id; else (the index alone lost) the record of
-- the query's key. A record answers only for the operation it ran under.
-- ok is false when nothing is stored for the operation; known then says
-- that the store knows nothing of it ran. stored is the stored result,
-- when there is one (kind R), and rec the record.
CREATE FUNCTION @S@.find(p_tenant bytea, p_subject bytea, p_op bytea, p_key bytea, p_now bigint,
  OUT ok boolean, OUT known boolean, OUT stored @S@.answer, OUT rec @S@.records)
LANGUAGE plpgsql AS $$
DECLARE x @S@.ops; b @S@.bindings; kind text; ref bytea;
BEGIN
  ok := false; known := false;
  SELECT * INTO x FROM @S@.ops WHERE tenant = p_tenant AND subject = p_subject AND op = p_op AND until_ms > p_now;
  IF FOUND AND x.kind = 'n' THEN
    known := true;
  ELSIF FOUND THEN
    ok := true; kind := x.kind; ref := x.ref;
  END IF;
  IF NOT ok THEN
    SELECT * INTO b FROM @S@.bindings WHERE tenant = p_tenant AND subject = p_subject AND call_id = p_op AND until_ms > p_now;
    IF FOUND THEN
      IF b.code IS NOT NULL THEN
        ok := true; known := false; stored := @S@.result(b.code, 'local_replay', b.data, b.msg, 0, NULL);
        RETURN;
      ELSIF b.link IS NOT NULL THEN
        ok := true; kind := 'k'; ref := b.link;
      ELSE
        ok := false; known := true;
        RETURN;
      END IF;
      known := true;
    END IF;
  END IF;
  IF NOT ok AND length(p_key) > 0 AND NOT known THEN
    ok := true; kind := 'k'; ref := p_key;
  END IF;
  IF NOT ok THEN RETURN; END IF;
  IF kind = 'c' THEN
    SELECT * INTO b FROM @S@.bindings WHERE tenant = p_tenant AND subject = p_subject AND call_id = ref AND until_ms > p_now;
    IF NOT FOUND OR b.code IS NULL THEN
      ok := false; known := false;
      RETURN;
    END IF;
    known := false; stored := @S@.result(b.code, 'local_replay', b.data, b.msg, 0, NULL);
    RETURN;
  END IF;
  SELECT * INTO rec FROM @S@.records WHERE tenant = p_tenant AND subject = p_subject AND key = ref AND until_ms > p_now FOR UPDATE;
  IF NOT FOUND OR rec.state = 'X' THEN
    ok := false; rec := NULL;
    RETURN;
  END IF;
  IF rec.op <> p_op THEN
    ok := false; known := true; rec := NULL; -- the key is another operation's
    RETURN;
  END IF;
  known := false;
  IF rec.state = 'C' THEN
    stored := @S@.result('OK', 'local_replay', rec.data, rec.msg, 0, NULL);
  END IF;
END $$;

-- settled answers a status query from what is stored, audited (rule 15):
-- a stored result, or NOT_FOUND when nothing is stored and the query does
-- not name a tool and a key, or the store knows nothing of it ran. decided
-- is false otherwise, with rec the record, or lost set when nothing is
-- stored.
CREATE FUNCTION @S@.settled(p_tenant bytea, p_op bytea, p_key bytea, p_tool bytea, p_subject bytea, p_now bigint,
  p_body bytea, p_bsum text, OUT decided boolean, OUT lost boolean, OUT a @S@.answer, OUT rec @S@.records)
LANGUAGE plpgsql AS $$
DECLARE f record;
BEGIN
  decided := false; lost := false;
  SELECT * INTO f FROM @S@.find(p_tenant, p_subject, p_op, p_key, p_now);
  rec := f.rec;
  IF NOT f.ok AND NOT f.known AND length(p_key) > 0 AND length(p_tool) > 0 THEN
    lost := true;
    RETURN;
  ELSIF NOT f.ok THEN
    a := @S@.result('NOT_FOUND', 'fresh', NULL, NULL, 0, NULL);
  ELSIF (f.stored).kind IS NOT NULL THEN
    a := f.stored;
  ELSE
    RETURN;
  END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, a.code, a.delivery, 'no');
  decided := true;
END $$;

-- status answers a status query (rule 15).
CREATE FUNCTION @S@.status(p_locks bigint[], p_tenant bytea, p_subject bytea, p_op bytea, p_key bytea, p_tool bytea,
  p_fp bytea, p_now bigint, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE s record; r @S@.records; a @S@.answer;
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  SELECT * INTO s FROM @S@.settled(p_tenant, p_op, p_key, p_tool, p_subject, p_now, p_body, p_bsum);
  IF s.decided THEN RETURN s.a; END IF;
  a := @S@.result(NULL, NULL, NULL, NULL, 0, NULL); a.kind := 'P';
  IF s.lost THEN
    a.tool := p_tool; a.key := p_key; a.fp := p_fp; a.op := p_op; a.call_id := ''::bytea; a.lost := true;
    RETURN a;
  END IF;
  r := s.rec;
  IF r.state = 'P' AND r.lease_ms > p_now THEN
    PERFORM @S@.append(p_tenant, p_body, p_bsum, 'IN_PROGRESS', 'fresh', 'no');
    RETURN @S@.result('IN_PROGRESS', 'fresh', NULL, NULL, r.lease_ms - p_now, NULL);
  END IF;
  IF r.state = 'P' THEN
    -- its holder's lease expired: never run blind again
    UPDATE @S@.records SET state = 'U' WHERE tenant = p_tenant AND subject = p_subject AND key = r.key;
  END IF;
  a.tool := r.tool; a.key := r.key; a.fp := r.fp; a.call_id := coalesce(r.call_id, ''::bytea); a.op := r.op;
  RETURN a;
END $$;

-- settle ends a status query that returned a pending operation (rule 16):
-- it finds the operation again, and what is stored now decides.
-- p_receipt: 1 found (p_data), 2 absent, 0 inconclusive.
CREATE FUNCTION @S@.settle(p_locks bigint[], p_tenant bytea, p_subject bytea, p_call bytea, p_op bytea, p_key bytea,
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
      INSERT INTO @S@.bindings AS b (tenant, subject, call_id, fp, code, data, msg, until_ms)
        VALUES (p_tenant, p_subject, p_call, r.fp, 'OK', p_data, NULL, p_until)
        ON CONFLICT (tenant, subject, call_id) DO UPDATE SET fp = excluded.fp, code = 'OK', data = excluded.data, msg = NULL,
          link = CASE WHEN b.until_ms > p_now THEN b.link END, until_ms = excluded.until_ms;
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

-- charge takes a read's charge (guard.Budgeter.Charge, rules 23 and 24).
CREATE FUNCTION @S@.charge(p_locks bigint[], p_tenant bytea, p_token bytea, p_now bigint, p_until bigint, p_scope bytea,
  p_tool bytea, p_cost bigint, p_max_calls bigint, p_max_cost bigint, p_limit bigint, p_pstart bigint, p_pend bigint)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  RETURN @S@.take(p_tenant, p_token, p_now, p_until, p_scope, p_tool, p_cost, p_max_calls, p_max_cost, p_limit, p_pstart, p_pend);
END $$;

-- refund gives back a read's charge (guard.Budgeter.Refund, rule 25).
CREATE FUNCTION @S@.refund(p_locks bigint[], p_tenant bytea, p_token bytea, p_now bigint, p_until bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  PERFORM @S@.give_back(p_tenant, p_token, p_now, p_until);
END $$;

-- resolve settles one unknown or stuck write by an operator's verdict
-- (Store.Resolve), with its audit record, if the record is still what the
-- operator's tool read (p_fp, p_token, p_op). p_code is OK (the write took
-- place; p_data is its result) or NOT_FOUND (it did not: the record and
-- the index naming it are deleted, not a tombstone, so a late commit of a
-- holder that was alive after all stores the truth). Refusals are kind E:
-- gone, committed, changed, active (a lease not run out, unless forced).
CREATE FUNCTION @S@.resolve(p_locks bigint[], p_tenant bytea, p_subject bytea, p_key bytea, p_fp bytea, p_token bytea,
  p_op bytea, p_now bigint, p_until bigint, p_force boolean, p_code text, p_data bytea, p_msg bytea, p_body bytea, p_bsum text)
RETURNS @S@.answer LANGUAGE plpgsql AS $$
DECLARE k @S@.records; a @S@.answer;
BEGIN
  PERFORM pg_advisory_xact_lock(lk) FROM unnest(p_locks) AS lk; -- the step's locks, in the array's order
  a := @S@.result(NULL, NULL, NULL, NULL, 0, NULL); a.kind := 'E';
  SELECT * INTO k FROM @S@.records WHERE tenant = p_tenant AND subject = p_subject AND key = p_key AND until_ms > p_now FOR UPDATE;
  IF NOT FOUND OR k.state = 'X' THEN a.code := 'gone'; RETURN a; END IF;
  IF k.state = 'C' THEN a.code := 'committed'; RETURN a; END IF;
  IF k.fp <> p_fp OR coalesce(k.token, ''::bytea) <> p_token OR coalesce(k.op, ''::bytea) <> p_op OR k.state NOT IN ('P', 'U') THEN
    a.code := 'changed'; RETURN a;
  END IF;
  IF k.state = 'P' AND k.lease_ms > p_now AND NOT p_force THEN a.code := 'active'; RETURN a; END IF;
  IF p_code = 'OK' THEN
    PERFORM @S@.append(p_tenant, p_body, p_bsum, 'OK', 'fresh', 'yes');
    UPDATE @S@.records SET state = 'C', data = p_data, msg = NULL, until_ms = p_until
      WHERE tenant = p_tenant AND subject = p_subject AND key = p_key;
    PERFORM @S@.index_record(p_tenant, p_subject, k.op, p_key, coalesce(k.call_id, ''::bytea), p_now, p_until);
    PERFORM @S@.keep(p_tenant, coalesce(k.token, ''::bytea)); -- it ran: its budget charge stays
    RETURN @S@.result('OK', 'fresh', p_data, NULL, 0, NULL);
  END IF;
  PERFORM @S@.append(p_tenant, p_body, p_bsum, 'NOT_FOUND', 'fresh', 'no');
  PERFORM @S@.give_back(p_tenant, coalesce(k.token, ''::bytea), p_now, p_until); -- it did not run: its charge goes back
  DELETE FROM @S@.records WHERE tenant = p_tenant AND subject = p_subject AND key = p_key;
  DELETE FROM @S@.ops WHERE tenant = p_tenant AND subject = p_subject AND op = k.op AND kind = 'k' AND ref = p_key;
  RETURN @S@.result('NOT_FOUND', 'fresh', NULL, p_msg, 0, NULL);
END $$;
