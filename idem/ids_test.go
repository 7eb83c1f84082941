package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestBadIDsStoreNothing: call ids, idempotency keys and operation ids
// over guard.MaxIDBytes or not valid UTF-8 are a host error (ErrBadID), and
// so is a write with none of them (ErrNoIdentity): nothing runs and not a
// single key is written. Ids of exactly MaxIDBytes are accepted.
func TestBadIDsStoreNothing(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	r := newRig(t, newStore(t, rdb))
	long, invalid := strings.Repeat("x", guard.MaxIDBytes+1), "bad-\xff-id"
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		set  func(c *guard.ExecutionContext)
		want error
	}{
		{"long call id", func(c *guard.ExecutionContext) { c.CallID = long }, guard.ErrBadID},
		{"long key", func(c *guard.ExecutionContext) { c.IdempotencyKey = long }, guard.ErrBadID},
		{"long operation id", func(c *guard.ExecutionContext) { c.OperationID = long }, guard.ErrBadID},
		{"invalid UTF-8 call id", func(c *guard.ExecutionContext) { c.CallID = invalid }, guard.ErrBadID},
		{"invalid UTF-8 key", func(c *guard.ExecutionContext) { c.IdempotencyKey = invalid }, guard.ErrBadID},
		{"invalid UTF-8 operation id", func(c *guard.ExecutionContext) { c.OperationID = invalid }, guard.ErrBadID},
		{"no identity", func(c *guard.ExecutionContext) { *c = guard.ExecutionContext{Provider: "faults"} }, guard.ErrNoIdentity},
	} {
		call := op{p: alice, callID: "c", key: "k"}.call()
		tc.set(&call.Context)
		res, err := r.Guard.Dispatch(ctx, call)
		if !errors.Is(err, tc.want) || res != nil {
			t.Errorf("%s: (%v, %v), want (nil, %v)", tc.name, res, err, tc.want)
		}
	}
	for _, id := range []string{long, invalid} {
		res, err := r.Guard.QueryStatus(ctx, guard.StatusCall{Principal: alice, OperationID: id, Tool: "put"})
		if !errors.Is(err, guard.ErrBadID) || res != nil {
			t.Errorf("status query of a bad operation id: (%v, %v), want ErrBadID", res, err)
		}
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("bad ids stored %d keys: %q", len(keys), keys)
	}
	if never, _, _ := r.led.tally(t, []op{{key: "k"}}); never != 1 {
		t.Fatal("a call with bad ids ran the tool")
	}

	edge := strings.Repeat("y", guard.MaxIDBytes)
	res, err := r.Guard.Dispatch(ctx, op{p: alice, callID: edge, key: edge}.call())
	if err != nil || res.Code != guard.CodeOK {
		t.Fatalf("ids of exactly %d bytes: (%v, %v), want OK", guard.MaxIDBytes, res, err)
	}
	if len(mr.Keys()) == 0 {
		t.Fatal("an accepted call stored nothing")
	}
}
