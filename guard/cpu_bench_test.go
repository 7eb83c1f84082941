package guard_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// stubStore is an in-process store that does no work: it answers with the
// outcome the guard computed, so a benchmark over it measures the guard's
// own CPU cost. It exists only in this benchmark.
type stubStore struct{}

func (stubStore) Finish(_ context.Context, e *guard.Entry) (*guard.Result, error) {
	return &guard.Result{Code: e.Code, Delivery: guard.DeliveryFresh, Data: e.Data, Message: e.Message}, nil
}
func (stubStore) Reserve(context.Context, *guard.Entry, time.Duration) (*guard.Result, error) {
	return nil, nil
}
func (stubStore) Commit(_ context.Context, e *guard.Entry) (*guard.Result, error) {
	return &guard.Result{Code: e.Code, Delivery: guard.DeliveryFresh, Data: e.Data, Message: e.Message}, nil
}
func (stubStore) Status(context.Context, *guard.Entry) (*guard.Result, *guard.Pending, error) {
	return &guard.Result{Code: guard.CodeNotFound}, nil, nil
}
func (stubStore) Settle(context.Context, *guard.Entry, *guard.Pending, guard.Receipt, []byte) (*guard.Result, error) {
	return &guard.Result{Code: guard.CodeOutcomeUnknown}, nil
}
func (stubStore) Audit(context.Context, string, int64, int) ([]guard.AuditRecord, guard.AuditHead, error) {
	return nil, guard.AuditHead{}, nil
}

type draftOut struct {
	DraftID  string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
}

// cpuTools are the conformance tools' shapes with no downstream work, so
// that BenchmarkGuardCPU measures the guard and not the fake order service.
func cpuTools() *toolset.Set {
	get := toolset.Read("get_order", "", func(_ context.Context, _ *guard.Invocation, in orders.GetOrderInput) (orders.OrderView, error) {
		return orders.OrderView{OrderRef: in.OrderRef, Status: "paid"}, nil
	}, nil)

	refund := toolset.Write("create_refund_draft", "", func(_ context.Context, _ *guard.Invocation, in orders.RefundInput) (draftOut, error) {
		return draftOut{DraftID: "DRAFT-1", OrderRef: in.OrderRef}, nil
	}, &toolset.Options[orders.RefundInput, draftOut]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"}})
	return toolset.MustNew(get, refund)
}

// BenchmarkGuardCPU measures the guard alone (store and tool work
// excluded): canonical parsing, fingerprint, schema validation, decoding,
// the grant check, output encoding and the audit body.
func BenchmarkGuardCPU(b *testing.B) {
	for _, bc := range benchCases {
		if bc.name == "replay" || bc.name == "conflict" {
			continue // decided by the store
		}
		b.Run(bc.name, func(b *testing.B) {
			w := newBenchWorld(b, stubStore{}, nil, guard.Options{})
			w.g = guard.New(cpuTools(), stubStore{}, guard.Options{Signer: w.signer})
			calls := make([]guard.Call, b.N)
			for i := range calls {
				calls[i] = bc.call(w, i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				res, err := w.g.Dispatch(context.Background(), calls[i])
				if err != nil || res.Code != bc.want {
					b.Fatalf("%v %v", res, err)
				}
			}
		})
	}
}
