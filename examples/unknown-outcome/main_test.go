package main

import (
	"context"
	"strings"
	"testing"
)

func TestUnknownOutcomeIsSettled(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"guard:     create_refund_draft OUTCOME_UNKNOWN (delivery fresh, recovery query_status) operation op_",
		"model:     calls query_operation_status {\"operation_id\":\"op_",
		`guard:     query_operation_status OK (delivery receipt_reconciled, recovery none) {"draft_id":"DRAFT-1"`,
		"assistant: Confirmed: refund draft DRAFT-1 exists for ORDER-7",
		"drafts:    1 created downstream",
		"audit:     3 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}
}
