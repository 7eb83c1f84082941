package orders

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// The tools' shapes with no downstream work, for the programs that measure
// what calls a tool (cmd/toolbench, internal/rediscost): a run then costs
// the guard, the store and Redis, not the fake order service.

// Arguments that NoopTools accept: a get_order call's and a
// create_refund_draft call's.
var (
	NoopReadArgs  = []byte(`{"order_ref":"ORDER-7"}`)
	NoopWriteArgs = []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)
)

// NoopDraft is what NoopCreateDraft returns.
type NoopDraft struct {
	DraftID  string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
	Reason   string `json:"reason"`
}

// NoopGetOrder answers get_order with the order it is asked for, paid.
func NoopGetOrder(_ context.Context, _ *guard.Invocation, in GetOrderInput) (OrderView, error) {
	return OrderView{OrderRef: in.OrderRef, Status: "paid"}, nil
}

// noopDrafts numbers NoopCreateDraft's drafts.
var noopDrafts atomic.Int64

// NoopCreateDraft answers create_refund_draft with a new draft's number.
func NoopCreateDraft(_ context.Context, _ *guard.Invocation, in RefundInput) (NoopDraft, error) {
	return NoopDraft{DraftID: "DRAFT-" + strconv.FormatInt(noopDrafts.Add(1), 10), OrderRef: in.OrderRef, Reason: in.Reason}, nil
}

// NoopTools declares NoopGetOrder (a read) and NoopCreateDraft (a write
// that needs approval and logs its order and reason) for a guard.
func NoopTools() *toolset.Set {
	get := toolset.Read("get_order", "Look up an order.", NoopGetOrder, nil)
	refund := toolset.Write("create_refund_draft", "Draft a refund.", NoopCreateDraft,
		&toolset.Options[RefundInput, NoopDraft]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"}})
	return toolset.MustNew(get, refund)
}
