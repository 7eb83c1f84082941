package guard_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
)

// TestExpiredIsNotDeclined: an expired approval and a human's no reach the
// model as the same code and recovery, but only the no tells it to stop.
func TestExpiredIsNotDeclined(t *testing.T) {
	exp, dec := guard.Expired(), guard.Declined("")
	if exp.Code != guard.CodeApprovalRequired || dec.Code != guard.CodeApprovalRequired {
		t.Fatalf("codes: expired %v, declined %v; want APPROVAL_REQUIRED", exp.Code, dec.Code)
	}
	if exp.Message == dec.Message {
		t.Fatal("an expired approval is worded as a refusal")
	}
	if strings.Contains(exp.Message, "declined this") || strings.Contains(exp.Message, "Do not retry") {
		t.Fatalf("expired message reads as a no: %q", exp.Message)
	}
	var m map[string]any
	if err := json.Unmarshal(exp.AppendJSON(nil), &m); err != nil {
		t.Fatal(err)
	}
	if m["recovery"] != "request_approval" || m["outcome"] != "not_started" {
		t.Fatalf("expired model result = %v", m)
	}
}
