package guard_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
)

// faultyStore is a MemStore whose Reserve fails as told, counting the
// commits the guard then sends.
type faultyStore struct {
	*guard.MemStore
	reserveErr error
	reserveFor time.Duration // Reserve blocks this long (or until its context ends) before failing
	commits    atomic.Int32
}

func (s *faultyStore) Reserve(ctx context.Context, e *guard.Entry, lease time.Duration) (*guard.Result, error) {
	if s.reserveFor > 0 {
		select {
		case <-time.After(s.reserveFor):
		case <-ctx.Done():
		}
	}
	return nil, s.reserveErr
}

func (s *faultyStore) Commit(ctx context.Context, e *guard.Entry) (*guard.Result, error) {
	s.commits.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.MemStore.Commit(ctx, e)
}

// A store that refuses its server (guard.ErrStoreRefused) is answered
// UNAVAILABLE at once: no release is sent, since it would be refused the
// same way. Any other error is followed by a release of the reservation
// whose reply may have been lost.
func TestRefusedStoreIsNotReleased(t *testing.T) {
	for _, tc := range []struct {
		err     error
		commits int32
	}{
		{fmt.Errorf("%w: eviction policy", guard.ErrStoreRefused), 0},
		{errors.New("connection reset"), 1},
	} {
		s := &faultyStore{MemStore: guard.NewMemStore(guard.MemStoreOptions{}), reserveErr: tc.err}
		w := guardtest.NewWorld(t, s)
		guardtest.Want(t, w.Dispatch(t, guardtest.Principal("t", "u"), guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1"}),
			guard.CodeUnavailable, guard.DeliveryFresh)
		if n := s.commits.Load(); n != tc.commits {
			t.Errorf("%v: %d release commits, want %d", tc.err, n, tc.commits)
		}
		if n := w.Down.Writes(); n != 0 {
			t.Errorf("%v: the write ran", tc.err)
		}
	}
}

// A reservation that never answers leaves the release part of the
// caller's deadline: the dispatch answers UNAVAILABLE, release sent,
// before the deadline has passed.
func TestReleaseFitsTheCallersDeadline(t *testing.T) {
	s := &faultyStore{MemStore: guard.NewMemStore(guard.MemStoreOptions{}), reserveErr: context.DeadlineExceeded, reserveFor: time.Hour}
	w := guardtest.NewWorld(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := w.Call(guardtest.Principal("t", "u"), guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1"})
	c.Approval = w.Grant(t, c.Principal, "put", `{"key":"a","value":"1"}`)
	res, err := w.Guard.Dispatch(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	guardtest.Want(t, res, guard.CodeUnavailable, guard.DeliveryFresh)
	if ctx.Err() != nil {
		t.Fatalf("the dispatch answered after its caller's deadline")
	}
	if n := s.commits.Load(); n < 1 {
		t.Fatalf("no release was sent")
	}
}
