package guard

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolguard/toolguard/internal/canon"
)

// AuditContract is the contract name of audit records.
const AuditContract = "tool-audit-v2"

// SideEffect says whether a dispatch caused a side effect.
type SideEffect string

// The side-effect values of an audit record.
const (
	SideEffectNone    SideEffect = "no"
	SideEffectYes     SideEffect = "yes"
	SideEffectUnknown SideEffect = "unknown"
)

// AuditRecord is one tool-audit-v2 record as stored: a fixed body the guard
// wrote before the store step (principal, context, action, tool,
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

// AuditHead is the last record's sequence number and hash of a tenant, kept
// beside the log so that a dropped tail is detected too.
type AuditHead struct {
	Seq  int64
	Hash string
}

// AuditBody is the fixed part of an audit record. It holds no raw
// arguments except the members the tool marks safe to log.
type AuditBody struct {
	Contract    string          `json:"contract"`
	Action      string          `json:"action"` // "dispatch" or "query_status"
	Time        string          `json:"time"`   // RFC 3339, UTC, the guard's clock
	Principal   AuditPrincipal  `json:"principal"`
	Context     AuditContext    `json:"context"`
	Tool        string          `json:"tool"`
	Fingerprint string          `json:"fingerprint"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Approval    *AuditApproval  `json:"approval"`
}

// AuditPrincipal is the principal as audited.
type AuditPrincipal struct {
	TenantID  string   `json:"tenant_id"`
	SubjectID string   `json:"subject_id"`
	Roles     []string `json:"roles"`
}

// AuditContext is the execution context as audited.
type AuditContext struct {
	Provider        string  `json:"provider"`
	APIFamily       string  `json:"api_family"`
	ResponseID      string  `json:"response_id"`
	CallID          string  `json:"call_id"`
	OperationID     string  `json:"operation_id"`
	IdempotencyKey  *string `json:"idempotency_key"`
	AdapterRevision string  `json:"adapter_revision"`
}

// AuditApproval names the grant a write ran under.
type AuditApproval struct {
	GrantID  string `json:"grant_id"`
	Approver string `json:"approver"`
}

// ChainHash computes a record's hash: the hex SHA-1 of prev, seq, the hex
// SHA-256 of the body, code, delivery and side effect, joined by newlines.
// The body is covered by SHA-256; the link uses SHA-1 only because it is
// the one digest Redis scripting offers, and the store must compute the
// link in the same atomic step that appends the record. Tamper evidence
// rests on second-preimage resistance, which SHA-1 still has. Anchor the
// head hash elsewhere to protect against someone who can rewrite the
// whole log.
func ChainHash(prev string, seq int64, body []byte, code Code, delivery Delivery, side SideEffect) string {
	b := sha256.Sum256(body)
	return ChainLink(prev, seq, hex.EncodeToString(b[:]), code.String(), string(delivery), string(side))
}

// ChainLink is ChainHash with the body already hashed (hex SHA-256).
func ChainLink(prev string, seq int64, bodySHA256, code, delivery, side string) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s\n%d\n%s\n%s\n%s\n%s", prev, seq, bodySHA256, code, delivery, side)
	return hex.EncodeToString(h.Sum(nil))
}

// ChainError describes the first record where an audit chain breaks.
type ChainError struct {
	Seq    int64 // the sequence number expected or found
	Reason string
}

// Error names the record and the reason.
func (e *ChainError) Error() string {
	return "guard: audit chain broken at record " + strconv.FormatInt(e.Seq, 10) + ": " + e.Reason
}

// VerifyAudit reads the whole audit log of a tenant from the store and
// checks the chain: sequence numbers without gaps from 1, each record's
// prev hash equal to the previous record's hash, each hash recomputed from
// its content, and the last record equal to the head. It returns the number
// of records checked, and a *ChainError for the first record that fails.
func VerifyAudit(ctx context.Context, s Store, tenantID string) (int64, error) {
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
			if err := CheckAuditRecord(r, seq+1, prev); err != nil {
				return seq, err
			}
			prev, seq = r.Hash, r.Seq
		}
		if len(recs) == 0 {
			break
		}
	}
	if head.Seq != seq || head.Hash != prev {
		return seq, &ChainError{Seq: seq + 1, Reason: fmt.Sprintf("head is record %d, log ends at %d (a tail was dropped or the head edited)", head.Seq, seq)}
	}
	return seq, nil
}

// CheckAuditRecord checks one record against the sequence number and prev
// hash the chain expects.
func CheckAuditRecord(r AuditRecord, wantSeq int64, prev string) error {
	switch {
	case r.Seq != wantSeq:
		return &ChainError{Seq: wantSeq, Reason: fmt.Sprintf("found record %d (records dropped or reordered)", r.Seq)}
	case r.PrevHash != prev:
		return &ChainError{Seq: r.Seq, Reason: "prev hash does not match the previous record"}
	case r.Hash != ChainHash(prev, r.Seq, r.Body, r.Code, r.Delivery, r.SideEffect):
		return &ChainError{Seq: r.Seq, Reason: "hash does not match the record's content (edited)"}
	}
	var b AuditBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Contract != AuditContract {
		return &ChainError{Seq: r.Seq, Reason: "body is not a tool-audit-v2 record"}
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

// auditBody writes the fixed part of the audit record of an invocation: the
// JSON of AuditBody, written by hand because it is on every dispatch's path.
func auditBody(action string, inv *Invocation) []byte {
	str := func(dst []byte, s string) []byte { return canon.AppendString(dst, strings.ToValidUTF8(s, "\uFFFD")) }
	b := make([]byte, 0, 768)
	b = append(b, `{"contract":"`+AuditContract+`","action":`...)
	b = str(b, action)
	b = append(b, `,"time":"`...)
	b = inv.Now.UTC().AppendFormat(b, time.RFC3339Nano) // nothing in it to escape
	b = append(b, '"')
	b = append(b, `,"principal":{"tenant_id":`...)
	b = str(b, inv.Principal.TenantID)
	b = append(b, `,"subject_id":`...)
	b = str(b, inv.Principal.SubjectID)
	b = append(b, `,"roles":[`...)
	for i, r := range inv.Principal.Roles {
		if i > 0 {
			b = append(b, ',')
		}
		b = str(b, r)
	}
	b = append(b, `]},"context":{"provider":`...)
	b = str(b, inv.Context.Provider)
	b = append(b, `,"api_family":`...)
	b = str(b, inv.Context.APIFamily)
	b = append(b, `,"response_id":`...)
	b = str(b, inv.Context.ResponseID)
	b = append(b, `,"call_id":`...)
	b = str(b, inv.Context.CallID)
	b = append(b, `,"operation_id":`...)
	b = str(b, inv.opID)
	b = append(b, `,"idempotency_key":`...)
	if k := inv.Context.IdempotencyKey; k != "" {
		b = str(b, k)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"adapter_revision":`...)
	b = str(b, inv.Context.AdapterRevision)
	b = append(b, `},"tool":`...)
	b = str(b, inv.Proposal.Name)
	b = append(b, `,"fingerprint":`...)
	b = str(b, inv.Fingerprint)
	if inv.tool != nil {
		if obj, ok := inv.args.(map[string]any); ok {
			first := true
			for _, name := range inv.tool.LoggedArguments() {
				v, ok := obj[name]
				if !ok {
					continue
				}
				if first {
					b = append(b, `,"arguments":{`...)
					first = false
				} else {
					b = append(b, ',')
				}
				b = str(b, name)
				b = append(b, ':')
				b = canon.AppendValue(b, v)
			}
			if !first {
				b = append(b, '}')
			}
		}
	}
	b = append(b, `,"approval":`...)
	if g := inv.Grant; g != nil {
		b = append(b, `{"grant_id":`...)
		b = str(b, g.ID)
		b = append(b, `,"approver":`...)
		b = str(b, g.Approver)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}
