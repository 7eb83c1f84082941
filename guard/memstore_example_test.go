package guard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// A write reserved and committed, then replayed by its key under another
// call id; the audit log verifies.
func ExampleMemStore() {
	ctx := context.Background()
	s := guard.NewMemStore(guard.MemStoreOptions{})
	now := time.Unix(1_700_000_000, 0)
	entry := func(callID, token string) *guard.Entry {
		return &guard.Entry{TenantID: "acme", SubjectID: "alice", CallID: callID, OperationID: callID,
			IdempotencyKey: "k:order-42", Tool: "place_order", Fingerprint: "fp-1", Effect: guard.Write,
			Now: now, Token: token, SideEffect: guard.SideEffectYes,
			AuditBody: []byte(`{"contract":"tool-audit-v2","action":"dispatch"}`)}
	}

	e := entry("call-1", "token-1")
	answer, _ := s.Reserve(ctx, e, 30*time.Second)
	fmt.Println("reserved:", answer == nil)
	e.Code, e.Data = guard.CodeOK, []byte(`{"order":42}`)
	res, _ := s.Commit(ctx, e)
	fmt.Println(res.Code, res.Delivery, string(res.Data))

	res, _ = s.Reserve(ctx, entry("call-2", "token-2"), 30*time.Second)
	fmt.Println(res.Code, res.Delivery, string(res.Data))

	n, err := guard.VerifyAudit(ctx, s, "acme")
	fmt.Println("audit records:", n, err)
	// Output:
	// reserved: true
	// OK fresh {"order":42}
	// OK local_replay {"order":42}
	// audit records: 2 <nil>
}
