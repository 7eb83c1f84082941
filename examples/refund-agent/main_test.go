package main

import (
	"context"
	"strings"
	"testing"
)

func TestRefundAgentApproved(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, true); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"approval:  create_refund_draft approved by flag -approve",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		`guard:     create_refund_draft OK (delivery local_replay, recovery none) {"draft_id":"DRAFT-1"`,
		"assistant: Done: refund draft DRAFT-1 for ORDER-7 (duplicate) is created.",
		"drafts:    1 created downstream",
		"audit:     4 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}
}

func TestRefundAgentDenied(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "drafts:    0 created downstream") || !strings.Contains(s, "denied by flag -approve") ||
		!strings.Contains(s, "assistant: I could not draft the refund: APPROVAL_REQUIRED") {
		t.Errorf("denied run:\n%s", s)
	}
}

func TestRefundAgentTerminal(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, strings.NewReader("y\n"), false); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "[y/N] ") || !strings.Contains(s, "drafts:    1 created downstream") {
		t.Errorf("terminal approval:\n%s", s)
	}
}
