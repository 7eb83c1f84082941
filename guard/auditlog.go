package guard

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// Reading the audit log back. The guard writes each record's body
// (AuditBody) and the store appends it in the same atomic step that stores
// the result; what comes after is here: reading a tenant's records back
// (AuditLog), checking the chain (VerifyAudit), and rendering a record as
// one flat JSON object.

// AuditLog is what VerifyAudit reads: a store's audit records of a tenant.
type AuditLog interface {
	// Audit returns up to limit records of the tenant with sequence
	// numbers greater than after, in order, and the tenant's chain head.
	Audit(ctx context.Context, tenantID string, after int64, limit int) ([]AuditRecord, AuditHead, error)
}

// AuditStore is a Store whose audit log can be read back: what agentloop,
// the case runner and the conformance suite (guardtest) keep records in.
// idem.Store and MemStore are both.
type AuditStore interface {
	Store
	AuditLog
}

// AuditRecord is one tool-audit-v2 record as stored: a fixed body the
// guard wrote before the store step (principal, context, action, tool,
// fingerprint, approval, time), the fields the store decided atomically
// (code, delivery, side effect), and the hash chain.
type AuditRecord struct {
	Seq        int64           // 1, 2, … per tenant
	Body       json.RawMessage // the JSON of AuditBody as written (fields in declared order), hashed as stored
	Code       Code
	Delivery   Delivery
	SideEffect SideEffect
	PrevHash   string // Hash of record Seq-1; "" for the first
	Hash       string
}

// AuditHead is the last record's sequence number and hash of a tenant,
// kept beside the log so that a dropped tail is detected too.
type AuditHead struct {
	Seq  int64
	Hash string
}

// Link computes the record's hash from its content and PrevHash (its Hash
// field is not read): the hex SHA-1 of the previous hash, seq, the hex
// SHA-256 of the body, code, delivery and side effect, joined by newlines.
// The body is covered by SHA-256; the link uses SHA-1 only because it is
// the one digest Redis scripting offers, and the store must compute the
// link in the same atomic step that appends the record. Tamper evidence
// rests on second-preimage resistance, which SHA-1 still has. Anchor the
// head hash elsewhere to protect against someone who can rewrite the whole
// log.
func (r AuditRecord) Link() string {
	b := sha256.Sum256(r.Body)
	h := sha1.New()
	fmt.Fprintf(h, "%s\n%d\n%s\n%s\n%s\n%s", r.PrevHash, r.Seq, hex.EncodeToString(b[:]), r.Code.String(), r.Delivery, r.SideEffect)
	return hex.EncodeToString(h.Sum(nil))
}

// AuditChainError describes the first record where an audit chain breaks.
type AuditChainError struct {
	Seq    int64 // the sequence number expected or found
	Reason string
}

// Error names the record and the reason.
func (e *AuditChainError) Error() string {
	return "audit: chain broken at record " + strconv.FormatInt(e.Seq, 10) + ": " + e.Reason
}

// VerifyAudit reads the whole audit log of a tenant from the store and
// checks the chain: sequence numbers without gaps from 1, each record's
// prev hash equal to the previous record's hash, each hash recomputed from
// its content, and the last record equal to the head. It returns the number
// of records checked, and an *AuditChainError for the first record that
// fails.
func VerifyAudit(ctx context.Context, s AuditLog, tenantID string) (int64, error) {
	var (
		prev = ""
		seq  int64
		head AuditHead
	)
	for {
		recs, h, err := s.Audit(ctx, tenantID, seq, 1000)
		if err != nil {
			return seq, err
		}
		head = h
		for _, r := range recs {
			if err := r.Check(seq+1, prev); err != nil {
				return seq, err
			}
			prev, seq = r.Hash, r.Seq
		}
		if len(recs) == 0 {
			break
		}
	}
	if head.Seq != seq || head.Hash != prev {
		return seq, &AuditChainError{Seq: seq + 1, Reason: fmt.Sprintf("head is record %d, log ends at %d (a tail was dropped or the head edited)", head.Seq, seq)}
	}
	return seq, nil
}

// Check checks the record against the sequence number and prev hash the
// chain expects.
func (r AuditRecord) Check(wantSeq int64, prev string) error {
	switch {
	case r.Seq != wantSeq:
		return &AuditChainError{Seq: wantSeq, Reason: fmt.Sprintf("found record %d (records dropped or reordered)", r.Seq)}
	case r.PrevHash != prev:
		return &AuditChainError{Seq: r.Seq, Reason: "prev hash does not match the previous record"}
	case r.Hash != r.Link():
		return &AuditChainError{Seq: r.Seq, Reason: "hash does not match the record's content (edited)"}
	}
	var b AuditBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Contract != AuditContract {
		return &AuditChainError{Seq: r.Seq, Reason: "body is not a tool-audit-v2 record"}
	}
	return nil
}

// MarshalJSON writes the record as one flat tool-audit-v2 JSON object: the
// body's members, then seq, code, status, outcome, delivery, side_effect,
// prev_hash and hash.
func (r AuditRecord) MarshalJSON() ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return nil, err
	}
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		body[k] = b
	}
	put("seq", r.Seq)
	put("code", r.Code.String())
	put("status", r.Code.Status())
	put("outcome", r.Code.Outcome())
	put("delivery", r.Delivery)
	put("side_effect", r.SideEffect)
	put("prev_hash", r.PrevHash)
	put("hash", r.Hash)
	return json.Marshal(body)
}
