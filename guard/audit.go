package guard

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/toolguard/toolguard/internal/canon"
)

// AuditContract names audit records: every body's "contract" member.
// AuditLog and VerifyAudit read and verify what the guard writes.
const AuditContract = "tool-audit-v2"

// AuditBody is the fixed part of an audit record, written by the guard
// before the store step and hashed as written: these members, in this
// order (auditBody writes them by hand, for speed; a test checks it against
// encoding/json). It holds no raw arguments except the members the tool
// marks safe to log. Records of an operator's resolution (package idem)
// add who resolved it and how.
type AuditBody struct {
	Contract    string          `json:"contract"`
	Action      string          `json:"action"` // "dispatch", "query_status" or "resolve"
	Time        string          `json:"time"`   // RFC 3339, UTC, the guard's clock
	Principal   AuditPrincipal  `json:"principal"`
	Context     AuditContext    `json:"context"`
	Tool        string          `json:"tool"`
	Fingerprint string          `json:"fingerprint"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Approval    *AuditApproval  `json:"approval"`
	// Operator, Resolution and Forced are a resolution's: who settled the
	// operation, the outcome they established, and whether its lease was
	// still running.
	Operator   string `json:"operator,omitempty"`
	Resolution string `json:"resolution,omitempty"`
	Forced     bool   `json:"forced,omitempty"`
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

// AuditApproval names the grant a write ran under (or presented, for a
// grant refused as spent).
type AuditApproval struct {
	GrantID  string `json:"grant_id"`
	Approver string `json:"approver"`
}

// SideEffect says whether a dispatch caused a side effect.
type SideEffect string

// The side-effect values of an audit record.
const (
	SideEffectNone    SideEffect = "no"
	SideEffectYes     SideEffect = "yes"
	SideEffectUnknown SideEffect = "unknown"
)

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
			for _, name := range inv.tool.Spec().LoggedArguments {
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
				b = inv.secrets.appendLogged(b, inv, name, v)
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
