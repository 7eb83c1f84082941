package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/internal/resolution"
)

// This file is the operator's way out of an operation whose outcome nobody
// knows: list a tenant's unknown and stuck writes (Unsettled), and settle
// one by hand (Resolve), audited with the operator's name. cmd/toolctl is
// its command line.

// tag returns the tenant's key prefix up to and including its hash tag.
func (s *Store) tag(tenantID string) string {
	return s.prefix + "{t" + enc.EncodeToString([]byte(tenantID)) + "}"
}

// storedRecord is an idempotency record as the operator's tools read it.
type storedRecord struct {
	fp, state, op, tool, key, call, token string
	lease                                 int64 // ms, the guard's clock
	exists                                bool
}

// readRecord makes a storedRecord of a record's fields (readFields); f is
// nil for a record that does not exist.
func readRecord(f map[string]string) storedRecord {
	lease, _ := strconv.ParseInt(f["lease"], 10, 64)
	return storedRecord{fp: shownFP(f["fp"]), state: f["state"], op: f["op"], tool: f["tool"], key: f["key"], call: f["call"],
		lease: lease, token: f["token"], exists: f != nil && f["fp"] != ""}
}

// Unsettled lists the tenant's writes whose outcome is unknown (state U)
// or whose reservation's lease ran out before now (state P): those a
// status query could not settle from a receipt and that no retry will run
// blind. It scans the tenant's idempotency records (SCAN on the server, or
// the cluster master, that holds the tenant's slot), sorted by subject and
// key. now is compared with leases, which are on the guard's clock.
func (s *Store) Unsettled(ctx context.Context, tenantID string, now time.Time) ([]guard.Unsettled, error) {
	tag := s.tag(tenantID)
	node, err := s.master(ctx, tag)
	if err != nil {
		return nil, err
	}
	var out []guard.Unsettled
	iter := node.Scan(ctx, 0, globEscape(tag+":k:")+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		recs, err := readFields(ctx, node, batch, recordNames)
		if err != nil {
			return err
		}
		for i, f := range recs {
			r := readRecord(f)
			u := guard.Unsettled{TenantID: tenantID, IdempotencyKey: r.key, OperationID: r.op, Tool: r.tool,
				CallID: r.call, Fingerprint: r.fp, Record: batch[i]}
			switch {
			case r.state == "U":
				u.State = guard.StateUnknown
			case r.state == "P" && r.lease <= now.UnixMilli():
				u.State, u.LeaseExpiry = guard.StateStuck, time.UnixMilli(r.lease)
			default:
				continue
			}
			if sub, _, ok := strings.Cut(strings.TrimPrefix(batch[i], tag+":k:"), ":"); ok {
				if b, err := enc.DecodeString(sub); err == nil {
					u.SubjectID = string(b)
				}
			}
			out = append(out, u)
		}
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b guard.Unsettled) int {
		return strings.Compare(a.SubjectID+"\x00"+a.IdempotencyKey, b.SubjectID+"\x00"+b.IdempotencyKey)
	})
	return out, nil
}

// globEscape quotes the characters special to Redis glob patterns: a prefix
// may contain them.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Resolve settles one unknown or stuck write by an operator's verdict, in
// one atomic step with its audit record (appended first; action "resolve",
// naming the operator and the verdict). guard.OutcomeCommitted stores the data as the
// committed result: a retry of the key or call id replays it (local_replay)
// and a status query of the operation answers it. guard.OutcomeNotStarted deletes the
// record (and the operation index naming it): the key is free and a retry
// runs. It refuses a record that is committed (guard.ErrAlreadyCommitted), absent
// or released (guard.ErrNoRecord), or reserved with a lease that has not run out
// before r.Now unless r.Force (guard.ErrLeaseActive). It returns the result as a
// replay would answer it. With Options.Replicas, a resolution that too few
// replicas acknowledged is returned with ErrNotReplicated: it was applied.
func (s *Store) Resolve(ctx context.Context, r guard.Resolution) (*guard.Result, error) {
	if err := resolution.Check("idem", r.Operator, r.IdempotencyKey != "" || r.OperationID != "", r.Outcome, r.Data); err != nil {
		return nil, err
	}
	var data []byte
	if r.Outcome == guard.OutcomeCommitted {
		var err error
		if data, _, err = canon.Parse(r.Data, canon.Limits{}); err != nil {
			return nil, fmt.Errorf("idem: result data: %w", err)
		}
	}
	recKey, err := s.findRecord(ctx, r)
	if err != nil {
		return nil, err
	}
	recs, err := readFields(ctx, s.rdb, []string{recKey}, recordNames)
	if err != nil {
		return nil, err
	}
	rec := readRecord(recs[0])
	what := fmt.Sprintf("tenant %q subject %q key %q", r.TenantID, r.SubjectID, rec.key)
	switch {
	case !rec.exists || rec.state == "X":
		return nil, fmt.Errorf("idem: %w: %s", guard.ErrNoRecord, what)
	case rec.state == "C":
		return nil, fmt.Errorf("idem: %w: %s (operation %q)", guard.ErrAlreadyCommitted, what, rec.op)
	case rec.state == "P" && rec.lease > r.Now.UnixMilli() && !r.Force:
		return nil, fmt.Errorf("idem: %w: %s (operation %q) is reserved until %s; force it only if its holder is known to be gone",
			guard.ErrLeaseActive, what, rec.op, time.UnixMilli(rec.lease).UTC().Format(time.RFC3339))
	case rec.state != "P" && rec.state != "U":
		return nil, fmt.Errorf("idem: %s is in state %q, which cannot be resolved", what, rec.state)
	}
	k := makeKeys(s.prefix, r.TenantID, r.SubjectID, "", rec.key, rec.op)
	if k.idem != recKey {
		return nil, fmt.Errorf("idem: record %q names key %q of another subject", recKey, rec.key)
	}
	body := resolution.Body{Now: r.Now, TenantID: r.TenantID, SubjectID: r.SubjectID, Operator: r.Operator, Outcome: r.Outcome,
		Force: r.Force, CallID: rec.call, OperationID: rec.op, Key: rec.key, Tool: rec.tool, Fingerprint: rec.fp}.JSON()
	sum := sha256.Sum256(body)
	code, msg := guard.CodeOK, ""
	if r.Outcome == guard.OutcomeNotStarted {
		code, msg = guard.CodeNotFound, resolution.NotExecutedMessage
	}
	a := &scriptArgs{fingerprint: storedFP(rec.fp), now: r.Now.UnixMilli(), key: rec.key,
		opID: rec.op, tool: rec.tool, code: codeName(code), data: string(data), message: msg,
		retryMS: "0", side: string(guard.SideEffectNone), body: encodeBody(body),
		bodySum: hex.EncodeToString(sum[:]), token: rec.token, ttlMS: s.ttlMS,
		auditTTLMS: s.auditTTLMS, fence: s.fenceArg()}
	// The reservation may hold a budget charge, which the resolution keeps
	// or gives back.
	keys := s.withBudget(k.list(), a, r.TenantID)
	reply, runErr := s.run(ctx, resolveScript, keys, a.argv())
	if runErr != nil && !errors.Is(runErr, ErrNotReplicated) {
		return nil, runErr
	}
	if len(reply) == 2 && reply[0] == "E" {
		switch reply[1] {
		case "gone":
			return nil, fmt.Errorf("idem: %w: %s was released meanwhile", guard.ErrNoRecord, what)
		case "committed":
			return nil, fmt.Errorf("idem: %w: %s was committed meanwhile", guard.ErrAlreadyCommitted, what)
		}
		return nil, fmt.Errorf("idem: %w: %s", guard.ErrRecordChanged, what)
	}
	res, err := parseResult(reply, a)
	if err != nil {
		return nil, err
	}
	return res, runErr
}

// findRecord returns the Redis key of the record a resolution names: by its
// key, or through its operation's index, or else through the binding of the
// call whose id is the operation id (an operation named after its call has
// no index).
func (s *Store) findRecord(ctx context.Context, r guard.Resolution) (string, error) {
	if r.IdempotencyKey != "" {
		return makeKeys(s.prefix, r.TenantID, r.SubjectID, "", r.IdempotencyKey, "").idem, nil
	}
	k := makeKeys(s.prefix, r.TenantID, r.SubjectID, "", "", r.OperationID)
	ref, err := s.rdb.Get(ctx, k.op).Result()
	if errors.Is(err, redis.Nil) {
		b, err := readFields(ctx, s.rdb, []string{k.opCall}, bindingNames)
		if err != nil {
			return "", err
		}
		code, key := b[0]["code"], b[0]["key"]
		if strings.HasPrefix(key, ":") { // the record's key after the tenant's hash tag
			key = s.tag(r.TenantID) + key
		}
		switch {
		case code != "":
			ref = "c" + k.opCall
		case key != "":
			ref = "k" + key
		default:
			return "", fmt.Errorf("idem: %w: tenant %q subject %q has no operation %q", guard.ErrNoRecord, r.TenantID, r.SubjectID, r.OperationID)
		}
	} else if err != nil {
		return "", err
	}
	kind, key := "", ""
	if ref != "" {
		kind, key = ref[:1], ref[1:]
	}
	if kind == "c" {
		// A call binding holds a terminal result: nothing is unsettled.
		return "", fmt.Errorf("idem: %w: operation %q of tenant %q subject %q has a final result", guard.ErrAlreadyCommitted,
			r.OperationID, r.TenantID, r.SubjectID)
	}
	if kind != "k" || !strings.HasPrefix(key, s.tag(r.TenantID)+":k:") {
		return "", fmt.Errorf("idem: the index of operation %q names %q, not a record of the tenant", r.OperationID, ref)
	}
	return key, nil
}
