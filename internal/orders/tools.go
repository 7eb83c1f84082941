package orders

import (
	"context"
	"errors"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// GetOrderInput is the input of get_order.
type GetOrderInput struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order reference\\, e.g. ORDER-7."`
}

// OrderView is what get_order returns.
type OrderView struct {
	OrderRef string `json:"order_ref"`
	Status   string `json:"status"`
}

// RefundInput is the input of create_refund_draft.
type RefundInput struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged,enum=not_received,description=Why the order is refunded."`
}

// SupportRole may read every order of its own tenant.
const SupportRole = "support"

// Tools declares get_order and create_refund_draft on the service.
//
// get_order is a read; the principal may see its own orders, or every order
// of its tenant with the support role. create_refund_draft is a write that
// needs approval, on orders the principal owns; its receipt lookup asks the
// service by idempotency key. Anything else is NOT_FOUND.
func Tools(svc *Service) *toolset.Set {
	getOrder := toolset.Read("get_order", "Look up an order by its reference.", func(ctx context.Context, inv *guard.Invocation, in GetOrderInput) (OrderView, error) {
		o, err := svc.GetOrder(ctx, inv.Principal.TenantID, in.OrderRef)
		if err != nil {
			return OrderView{}, toGuardError(err)
		}
		return OrderView{OrderRef: o.Ref, Status: o.Status}, nil
	}, &toolset.Options[GetOrderInput, OrderView]{
		Authorize: func(_ context.Context, inv *guard.Invocation, in GetOrderInput) error {
			owner, ok := svc.Owner(inv.Principal.TenantID, in.OrderRef)
			if !ok || (owner != inv.Principal.SubjectID && !inv.Principal.HasRole(SupportRole)) {
				return guard.ErrNotFound
			}
			return nil
		},
		LoggedArguments: []string{"order_ref"},
	})

	refund := toolset.Write("create_refund_draft", "Create a refund draft for an order. Needs a human's approval.", func(ctx context.Context, inv *guard.Invocation, in RefundInput) (Draft, error) {
		d, err := svc.CreateDraft(ctx, inv.IdempotencyKey, inv.Principal.TenantID, in.OrderRef, in.Reason)
		if err != nil {
			return Draft{}, toGuardError(err)
		}
		return d, nil
	}, &toolset.Options[RefundInput, Draft]{
		NeedsApproval: true,
		Authorize: func(_ context.Context, inv *guard.Invocation, in RefundInput) error {
			owner, ok := svc.Owner(inv.Principal.TenantID, in.OrderRef)
			if !ok || owner != inv.Principal.SubjectID {
				return guard.ErrNotFound
			}
			return nil
		},
		Receipt: func(ctx context.Context, inv *guard.Invocation) (Draft, bool, error) {
			return svc.Receipt(ctx, inv.IdempotencyKey)
		},
		LoggedArguments: []string{"order_ref", "reason"},
	})

	return toolset.MustNew(getOrder, refund)
}

// toGuardError translates the service's errors into the guard's typed
// errors, as a real integration does with its client's errors.
func toGuardError(err error) error {
	var rl *RateLimitError
	switch {
	case errors.Is(err, ErrNotSent):
		return guard.NotStarted(err)
	case errors.As(err, &rl):
		return guard.RateLimited(rl.RetryAfter, err)
	case errors.Is(err, ErrReplyLost):
		return guard.UnknownOutcome(err)
	case errors.Is(err, ErrNoSuchOrder):
		return guard.ErrNotFound
	}
	return err
}
