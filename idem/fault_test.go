package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// proxied returns a world whose store reaches Redis through a fault proxy.
func proxied(t *testing.T, target string) (*guardtest.World, *redistest.Proxy) {
	t.Helper()
	px := redistest.NewProxy(t, target)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: px.Addr(), MaxRetries: 1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return guardtest.NewWorld(t, newStore(t, rdb)), px
}

func faultTargets(t *testing.T) map[string]string {
	mr, _ := redistest.Mini(t)
	targets := map[string]string{"miniredis": mr.Addr()}
	if rdb := optionalStandalone(t); rdb != nil {
		targets["standalone"] = rdb.(*redis.Client).Options().Addr
	}
	return targets
}

func optionalStandalone(t *testing.T) redis.UniversalClient {
	var rdb redis.UniversalClient
	t.Run("standalone-available", func(t *testing.T) { rdb = redistest.Standalone(t) })
	return rdb
}

var alice = guardtest.Principal("tenant-a", "alice")

func TestStoreUnreachableBeforeTheCall(t *testing.T) {
	for name, target := range faultTargets(t) {
		t.Run(name, func(t *testing.T) {
			w, px := proxied(t, target)
			px.Cut()
			r := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"})
			guardtest.Want(t, r, guard.CodeUnavailable, guard.DeliveryFresh)
			if r.Recovery() != guard.RecoveryRetryAfter || r.Outcome() != guard.OutcomeNotStarted {
				t.Fatalf("recovery %s outcome %s", r.Recovery(), r.Outcome())
			}
			if n := w.Down.Writes(); n != 0 {
				t.Fatalf("%d side effects with the store unreachable, want 0", n)
			}
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "c2"}), guard.CodeUnavailable, guard.DeliveryFresh)
			guardtest.Want(t, w.Status(t, alice, "c1"), guard.CodeUnavailable, guard.DeliveryFresh)
			px.Restore()
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"}), guard.CodeOK, guard.DeliveryFresh)
		})
	}
}

func TestConnectionDroppedBetweenReserveAndCommit(t *testing.T) {
	for name, target := range faultTargets(t) {
		t.Run(name, func(t *testing.T) {
			w, px := proxied(t, target)
			entered, release := w.Down.Block()
			done := make(chan *guard.Result, 1)
			go func() {
				done <- w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1", Key: "idem-1"})
			}()
			<-entered // reserved, and the side effect has happened
			px.Cut()
			release()
			r := <-done
			guardtest.Want(t, r, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
			if r.OperationID != "c1" {
				t.Fatalf("operation id %q, want c1", r.OperationID)
			}
			px.Restore()
			// The record is still held under its lease: nobody runs it again.
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"}), guard.CodeInProgress, guard.DeliveryFresh)
			w.Advance(guardtest.Lease + time.Second)
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c2", Key: "idem-1"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
			if n := w.Down.Writes(); n != 1 {
				t.Fatalf("%d side effects, want 1", n)
			}
			// A status query settles it from the downstream receipt.
			guardtest.Want(t, w.Status(t, alice, "c1"), guard.CodeOK, guard.DeliveryReceiptReconciled)
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c3", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
			if _, err := guard.VerifyAudit(context.Background(), w.Store, alice.TenantID); err != nil {
				t.Fatal(err)
			}
		})
	}
}
