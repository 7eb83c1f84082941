package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// loggedTool is a tool whose spec marks two arguments safe to log.
type loggedTool struct{ spec ToolSpec }

func (t *loggedTool) Spec() *ToolSpec                 { return &t.spec }
func (t *loggedTool) Decode([]byte, any) (any, error) { return nil, nil }
func (t *loggedTool) AuthorizeCall(context.Context, *Invocation) error {
	return nil
}
func (t *loggedTool) Execute(context.Context, *Invocation) (json.RawMessage, error) { return nil, nil }
func (t *loggedTool) LookupReceipt(context.Context, *Invocation) (json.RawMessage, bool, error) {
	return nil, false, nil
}

// The body auditBody writes by hand is AuditBody as encoding/json writes it,
// byte for byte (HTML left unescaped, as canonical JSON leaves it), so a
// reader's guard.AuditBody and the hashed bytes agree.
func TestAuditBodyIsAuditBodyAsJSON(t *testing.T) {
	key := "idem-1"
	now := time.Date(2026, 12, 1, 19, 21, 35, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		inv  Invocation
		want AuditBody
	}{
		{"write with a grant and logged arguments", Invocation{
			Principal: Principal{TenantID: "tenant-<a>", SubjectID: "user \"1\"", Roles: []string{"support", "ü"}},
			Proposal:  Proposal{Name: "refund"},
			Context: ExecutionContext{Provider: "openai", APIFamily: "responses", ResponseID: "resp_1", CallID: "call_1",
				IdempotencyKey: key, AdapterRevision: "openai-responses-v1"},
			Fingerprint: "ab12", Now: now, opID: "op-1",
			Grant: &Grant{ID: "grant_1", Approver: "ann & bob"},
			tool:  &loggedTool{ToolSpec{Name: "refund", Effect: Write, LoggedArguments: []string{"order_ref", "amount", "absent"}}},
			args:  map[string]any{"order_ref": "ORDER-7", "amount": json.Number("12.5"), "secret": "x"},
		}, AuditBody{
			Contract: AuditContract, Action: "dispatch", Time: now.Format(time.RFC3339Nano),
			Principal: AuditPrincipal{TenantID: "tenant-<a>", SubjectID: "user \"1\"", Roles: []string{"support", "ü"}},
			Context: AuditContext{Provider: "openai", APIFamily: "responses", ResponseID: "resp_1", CallID: "call_1",
				OperationID: "op-1", IdempotencyKey: &key, AdapterRevision: "openai-responses-v1"},
			Tool: "refund", Fingerprint: "ab12", Arguments: json.RawMessage(`{"order_ref":"ORDER-7","amount":12.5}`),
			Approval: &AuditApproval{GrantID: "grant_1", Approver: "ann & bob"},
		}},
		{"status query without key or grant", Invocation{
			Principal: Principal{TenantID: "t", SubjectID: "s"}, Proposal: Proposal{Name: ""}, Now: now, opID: "op-9",
		}, AuditBody{
			Contract: AuditContract, Action: "query_status", Time: now.Format(time.RFC3339Nano),
			Principal: AuditPrincipal{TenantID: "t", SubjectID: "s", Roles: []string{}},
			Context:   AuditContext{OperationID: "op-9"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false) // the guard writes canonical JSON, which escapes no HTML
			if err := enc.Encode(tc.want); err != nil {
				t.Fatal(err)
			}
			got := auditBody(tc.want.Action, &tc.inv)
			if string(got)+"\n" != want.String() {
				t.Fatalf("auditBody:\n%s\nencoding/json of AuditBody:\n%s", got, want.String())
			}
		})
	}
}
