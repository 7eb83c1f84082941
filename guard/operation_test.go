package guard_test

import (
	"context"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

type opIn struct {
	Ref string `json:"ref"`
}

// OperationID names the operation Dispatch runs a call as: the host's id,
// else a write's scope ids, else the call id; a status query for it finds
// the dispatched write.
func TestOperationID(t *testing.T) {
	noop := func(context.Context, *guard.Invocation, opIn) (string, error) { return "ok", nil }
	set := toolset.MustNew(
		toolset.Write("write", "A write.", noop, nil),
		toolset.Write("again", "A repeatable write.", noop, &toolset.Options[opIn, string]{Repeatable: true}),
		toolset.Read("read", "A read.", noop, nil),
	)
	g := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	p := guard.Principal{TenantID: "t", SubjectID: "s"}
	call := func(tool, op, key, scope string) guard.Call {
		return guard.Call{Principal: p, Proposal: guard.Proposal{Name: tool, Arguments: []byte(`{ "ref" : "R-1" }`)},
			Context: guard.ExecutionContext{CallID: "call-1", OperationID: op, IdempotencyKey: key, Scope: scope}}
	}
	scoped, _ := guard.ScopeIDs("run-1", guard.Fingerprint("write", []byte(`{"ref":"R-1"}`)))
	for _, c := range []struct {
		call guard.Call
		want string
	}{
		{call("write", "", "", "run-1"), scoped},
		{call("write", "op-host", "", "run-1"), "op-host"},
		{call("write", "", "key-1", "run-1"), "call-1"},
		{call("write", "", "", ""), "call-1"},
		{call("again", "", "", "run-1"), "call-1"},
		{call("read", "", "", "run-1"), "call-1"},
		{call("nosuch", "", "", "run-1"), "call-1"},
	} {
		if got := g.OperationID(c.call); got != c.want {
			t.Errorf("%s %+v: %q, want %q", c.call.Proposal.Name, c.call.Context, got, c.want)
		}
	}
	ctx := context.Background()
	if res, err := g.Dispatch(ctx, call("write", "", "", "run-1")); err != nil || res.Code != guard.CodeOK {
		t.Fatalf("dispatched %+v %v", res, err)
	}
	res, err := g.QueryStatus(ctx, guard.StatusCall{Principal: p, OperationID: scoped, Tool: "write", Context: guard.ExecutionContext{CallID: "status-1"}})
	if err != nil || res.Code != guard.CodeOK {
		t.Errorf("status of %s: %+v %v, want OK", scoped, res, err)
	}
}
