package toolset_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// ParseStatus refuses exactly what the status tool's schema refuses:
// strict, so tool is required and may be null (an entry point that reads
// an absent nullable member as null fills it first, contract section 3).
func TestParseStatusIsTheSchema(t *testing.T) {
	schema := toolset.StatusTool("").Schema()
	for _, args := range []string{
		`{"operation_id":"op","tool":null}`, `{"operation_id":"op","tool":"get_order"}`, `{"operation_id":"","tool":null}`,
		`{"operation_id":"op"}`, `{}`, `{"operation_id":7,"tool":null}`, `{"operation_id":"op","tool":1}`,
		`{"operation_id":"op","tool":null,"x":1}`, `null`, `[]`, `not json`,
	} {
		_, bad := toolset.ParseStatus([]byte(args))
		valid := false
		if json.Valid([]byte(args)) {
			valid = schema.Validate(parse(t, args)) == nil
		}
		if (bad == nil) != valid {
			t.Errorf("%s: ParseStatus refuses %t, the schema accepts %t", args, bad != nil, valid)
		}
		if bad != nil && (bad.Code != guard.CodeInvalidArguments || !strings.Contains(bad.Message, "operation_id")) {
			t.Errorf("%s: %s", args, bad)
		}
	}
}

// StatusInput.Call is the one query every entry point makes: the host's
// principal and context, the tool when named, and an operation id the
// guard would refuse made a stand-in that names nothing (NOT_FOUND, not a
// host error).
func TestStatusInputCall(t *testing.T) {
	p := guard.Principal{TenantID: "t", SubjectID: "s"}
	ec := guard.ExecutionContext{CallID: "c1"}
	in, bad := toolset.ParseStatus([]byte(`{"operation_id":"op-1","tool":"get_order"}`))
	if bad != nil {
		t.Fatal(bad)
	}
	sc := in.Call(p, ec)
	if sc.Principal.SubjectID != "s" || sc.OperationID != "op-1" || sc.Tool != "get_order" || sc.Context.CallID != "c1" {
		t.Fatalf("%+v", sc)
	}
	in, _ = toolset.ParseStatus([]byte(`{"operation_id":"op-1","tool":null}`))
	if sc := in.Call(p, ec); sc.Tool != "" {
		t.Fatalf("tool null: %+v", sc)
	}
	long := strings.Repeat("x", guard.MaxIDBytes+1)
	sc = toolset.StatusInput{OperationID: long}.Call(p, ec)
	if sc.OperationID != guard.SafeID(long) || !strings.HasPrefix(sc.OperationID, "sha256:") {
		t.Fatalf("long id: %q", sc.OperationID)
	}
}
