// Package orders is the conformance world of the tool-call contract: a
// fake order service (the downstream system the tools change) with
// injectable failures, a side-effect counter and receipts per idempotency
// key, and the two tools declared on it, get_order and create_refund_draft.
//
// Failures are injected here, into the downstream system, never into the
// guard: the tools translate the service's errors into the guard's typed
// errors exactly as a real integration would.
package orders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Order is an order of the fake service.
type Order struct {
	Ref      string
	TenantID string
	OwnerID  string
	Status   string
}

// Draft is a refund draft, the side effect of create_refund_draft.
type Draft struct {
	ID       string `json:"draft_id"`
	OrderRef string `json:"order_ref"`
	Reason   string `json:"reason"`
}

// Failure is a fault the service injects into its operations.
type Failure string

// The injectable failures, as named in the case files.
const (
	NoFailure Failure = "none"
	// FailBeforeExecute: the call fails before it reaches the service.
	FailBeforeExecute Failure = "timeout_before_execute"
	// FailRateLimit: the service refuses the call for rate.
	FailRateLimit Failure = "rate_limit"
	// FailAfterCommit: the draft is created, then the reply is lost.
	FailAfterCommit Failure = "timeout_after_commit"
	// FailAfterCommitNoReceipt: as FailAfterCommit, and receipt lookups
	// for that key fail.
	FailAfterCommitNoReceipt Failure = "timeout_after_commit_receipt_unavailable"
)

// Failures lists every failure the service knows.
func Failures() []Failure {
	return []Failure{NoFailure, FailBeforeExecute, FailRateLimit, FailAfterCommit, FailAfterCommitNoReceipt}
}

// The service's errors.
var (
	ErrNotSent        = errors.New("orders: request not sent (timeout before execute)")
	ErrReplyLost      = errors.New("orders: request sent, reply lost (timeout after commit)")
	ErrNoSuchOrder    = errors.New("orders: no such order")
	ErrReceiptOffline = errors.New("orders: receipt lookup unavailable")
)

// RateLimitError is returned when the service refuses a call for rate.
type RateLimitError struct{ RetryAfter time.Duration }

// Error implements error.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("orders: rate limited, retry after %v", e.RetryAfter)
}

// Service is the fake order service. It is safe for concurrent use.
type Service struct {
	mu          sync.Mutex
	orders      map[string]Order
	failure     Failure
	next        Failure // a one-shot failure for the next operation
	drafts      int
	receipts    map[string]Draft
	noReceipt   map[string]bool
	sideEffects int
	calls       int
}

// NewService returns a service holding the conformance orders: ORDER-7
// (tenant-a, user-1, paid), ORDER-8 (tenant-a, user-2, shipped) and ORDER-9
// (tenant-b, user-1, paid).
func NewService() *Service {
	s := &Service{orders: map[string]Order{}, receipts: map[string]Draft{}, noReceipt: map[string]bool{}, failure: NoFailure}
	for _, o := range []Order{
		{"ORDER-7", "tenant-a", "user-1", "paid"},
		{"ORDER-8", "tenant-a", "user-2", "shipped"},
		{"ORDER-9", "tenant-b", "user-1", "paid"},
	} {
		s.orders[o.Ref] = o
	}
	return s
}

// AddOrder adds or replaces an order.
func (s *Service) AddOrder(o Order) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[o.Ref] = o
}

// SetFailure makes every later operation (GetOrder, CreateDraft, Receipt)
// fail so, until it is set again; NoFailure or "" clears it. Ownership
// lookups for authorization (Owner) never fail: they stand for the host's
// own policy data, not a remote call.
func (s *Service) SetFailure(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == "" {
		f = NoFailure
	}
	s.failure = f
}

// FailNext makes only the next operation (GetOrder or CreateDraft) fail so.
func (s *Service) FailNext(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = f
}

// take returns the failure for the operation starting now.
func (s *Service) take() Failure {
	if s.next != "" && s.next != NoFailure {
		f := s.next
		s.next = ""
		return f
	}
	return s.failure
}

// SideEffects returns how many drafts the service has created.
func (s *Service) SideEffects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sideEffects
}

// Calls returns how many operations reached the service.
func (s *Service) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Owner returns the order's tenant and owner, for authorization. A tenant
// sees only its own orders: ok is false for an order of another tenant.
func (s *Service) Owner(tenantID, ref string) (owner string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, found := s.orders[ref]
	if !found || o.TenantID != tenantID {
		return "", false
	}
	return o.OwnerID, true
}

// preflight applies an injected failure that stops a call before it runs.
func (s *Service) preflight(f Failure) error {
	switch f {
	case FailBeforeExecute:
		return ErrNotSent
	case FailRateLimit:
		return &RateLimitError{RetryAfter: time.Second}
	}
	s.calls++
	return nil
}

// GetOrder reads an order of the tenant.
func (s *Service) GetOrder(ctx context.Context, tenantID, ref string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Order{}, ErrNotSent
	}
	f := s.take()
	if err := s.preflight(f); err != nil {
		return Order{}, err
	}
	o, ok := s.orders[ref]
	if !ok || o.TenantID != tenantID {
		return Order{}, ErrNoSuchOrder
	}
	if f == FailAfterCommit || f == FailAfterCommitNoReceipt {
		return Order{}, ErrReplyLost
	}
	return o, nil
}

// CreateDraft creates a refund draft once per idempotency key: a second
// call with the same key returns the first draft and changes nothing.
func (s *Service) CreateDraft(ctx context.Context, key, tenantID, ref, reason string) (Draft, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Draft{}, ErrNotSent
	}
	f := s.take()
	if err := s.preflight(f); err != nil {
		return Draft{}, err
	}
	if o, ok := s.orders[ref]; !ok || o.TenantID != tenantID {
		return Draft{}, ErrNoSuchOrder
	}
	d, seen := s.receipts[key]
	if !seen {
		s.drafts++
		s.sideEffects++
		d = Draft{ID: fmt.Sprintf("DRAFT-%d", s.drafts), OrderRef: ref, Reason: reason}
		if key != "" {
			s.receipts[key] = d
		}
	}
	switch f {
	case FailAfterCommit:
		return Draft{}, ErrReplyLost
	case FailAfterCommitNoReceipt:
		s.noReceipt[key] = true
		return Draft{}, ErrReplyLost
	}
	return d, nil
}

// Receipt returns the draft created with the idempotency key, if any. It
// fails while any failure is injected, and always for a key whose draft was
// created under FailAfterCommitNoReceipt.
func (s *Service) Receipt(ctx context.Context, key string) (Draft, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noReceipt[key] || s.failure != NoFailure {
		return Draft{}, false, ErrReceiptOffline
	}
	d, ok := s.receipts[key]
	return d, ok, nil
}
