package approvals

import (
	"context"
	"errors"
	"time"

	"github.com/toolguard/toolguard/host"
)

// Waiter is an host.Approver that puts the request in the inbox and
// waits for a person to decide it, for hosts that prefer a blocked run to
// a parked one. A request nobody decides before the deadline is recorded
// as expired and denied. An intent a human already denied in the run is
// denied at once, without asking again.
type Waiter struct {
	Queue *Queue
	// Wait bounds the wait; default (and at most) the store's TTL.
	Wait time.Duration
	// Poll is how often the request is read; default 250ms.
	Poll time.Duration
}

// Approve asks and waits. Its error is ctx's, or the store's.
func (w *Waiter) Approve(ctx context.Context, req host.ApprovalRequest) (host.Decision, error) {
	s := w.Queue
	if denied, err := s.Denied(ctx, req.Principal.TenantID, req.OperationID); err != nil || denied {
		return host.Decision{Approver: "an earlier denial in this run"}, err
	}
	r, err := s.Ask(ctx, req.RunID, req)
	if err != nil {
		return host.Decision{}, err
	}
	deadline := r.ExpiresAt
	if w.Wait > 0 && r.CreatedAt.Add(w.Wait).Before(deadline) {
		deadline = r.CreatedAt.Add(w.Wait)
	}
	poll := w.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		got, err := s.Get(ctx, r.TenantID, r.ID)
		if err != nil {
			return host.Decision{}, err
		}
		if got.Status == StatusExpired || got.Status == StatusPending && !s.clock.Now().Before(deadline) {
			return w.giveUp(ctx, got)
		}
		if got.Status != StatusPending {
			return decisionOf(got), nil
		}
		select {
		case <-ctx.Done():
			return host.Decision{}, ctx.Err()
		case <-t.C:
		}
	}
}

// giveUp records a request nobody decided in time as expired, unless
// someone decided it at the last moment.
func (w *Waiter) giveUp(ctx context.Context, r *Request) (host.Decision, error) {
	_, err := w.Queue.settle(ctx, r, StatusExpired, "", "", "")
	var de *DecidedError
	switch {
	case err == nil, errors.Is(err, ErrExpired):
		return host.Decision{Approver: "nobody (the request expired)", Reason: "nobody approved it in time", Expired: true}, nil
	case errors.As(err, &de):
		return host.Decision{Approved: de.Status == StatusApproved, Approver: de.DecidedBy}, nil
	}
	return host.Decision{}, err
}

func decisionOf(r *Request) host.Decision {
	switch r.Status {
	case StatusApproved:
		return host.Decision{Approved: true, Approver: r.DecidedBy}
	}
	return host.Decision{Approver: r.DecidedBy, Reason: r.Reason}
}
