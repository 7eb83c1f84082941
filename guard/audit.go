package guard

import (
	"strings"
	"time"

	"github.com/toolguard/toolguard/internal/canon"
)

// auditContract names audit records. It is audit.Contract: guard writes the
// records package audit reads, and audit.Check refuses a body with another
// name, so every verified chain in the tests keeps the two equal.
const auditContract = "tool-audit-v2"

// SideEffect says whether a dispatch caused a side effect.
type SideEffect string

// The side-effect values of an audit record.
const (
	SideEffectNone    SideEffect = "no"
	SideEffectYes     SideEffect = "yes"
	SideEffectUnknown SideEffect = "unknown"
)

// auditBody writes the fixed part of the audit record of an invocation: the
// JSON of audit.Body, written by hand because it is on every dispatch's path.
func auditBody(action string, inv *Invocation) []byte {
	str := func(dst []byte, s string) []byte { return canon.AppendString(dst, strings.ToValidUTF8(s, "\uFFFD")) }
	b := make([]byte, 0, 768)
	b = append(b, `{"contract":"`+auditContract+`","action":`...)
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
