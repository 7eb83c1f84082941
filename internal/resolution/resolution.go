// Package resolution writes the audit body of an operator's resolution of
// an unknown or stuck write, for the stores that have one (idem and
// pgstore: Resolve, cmd/toolctl).
package resolution

import (
	"strings"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
)

// Body is a resolution as audited: who resolved which record, how, when.
type Body struct {
	Now                 time.Time
	TenantID, SubjectID string
	Operator            string
	Outcome             guard.Outcome
	Force               bool
	CallID, OperationID string
	Key                 string // the record's effective key: "k:" and the caller's, or "o:" and the operation id
	Tool, Fingerprint   string
}

// JSON writes the body: the fields of guard.AuditBody, with action "resolve",
// the record's subject, call, operation, key, tool and fingerprint, and no
// approval, then the operator and the verdict. guard's own body writer is
// unexported and takes an invocation, which a resolution does not have;
// this writes the same canonical JSON (canon's string encoding), and
// guard.VerifyAudit reads it as a tool-audit-v2 body.
func (r Body) JSON() []byte {
	str := func(dst []byte, s string) []byte { return canon.AppendString(dst, strings.ToValidUTF8(s, "\uFFFD")) }
	b := make([]byte, 0, 512)
	b = append(b, `{"contract":"`+guard.AuditContract+`","action":"resolve","time":"`...)
	b = r.Now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","principal":{"tenant_id":`...)
	b = str(b, r.TenantID)
	b = append(b, `,"subject_id":`...)
	b = str(b, r.SubjectID)
	b = append(b, `,"roles":[]},"context":{"provider":"","api_family":"","response_id":"","call_id":`...)
	b = str(b, r.CallID)
	b = append(b, `,"operation_id":`...)
	b = str(b, r.OperationID)
	b = append(b, `,"idempotency_key":`...)
	if ctxKey, ok := strings.CutPrefix(r.Key, "k:"); ok {
		b = str(b, ctxKey) // the caller's key, as a dispatch audits it
	} else {
		b = append(b, "null"...) // "o:" and the operation id: the caller gave none
	}
	b = append(b, `,"adapter_revision":""},"tool":`...)
	b = str(b, r.Tool)
	b = append(b, `,"fingerprint":`...)
	b = str(b, r.Fingerprint)
	b = append(b, `,"approval":null,"operator":`...)
	b = str(b, r.Operator)
	b = append(b, `,"resolution":`...)
	b = str(b, string(r.Outcome))
	if r.Force {
		b = append(b, `,"forced":true`...)
	}
	return append(b, '}')
}
