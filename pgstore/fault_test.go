package pgstore_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
)

// proxied returns db's URL through a TCP proxy (internal/redistest's: it
// forwards any TCP), and the proxy.
func proxied(t *testing.T, db string) (string, *redistest.Proxy) {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	p := redistest.NewProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// TestWriteTxLostCommitReply: the batch carrying the outcome's commit step
// and COMMIT reaches Postgres, which commits, and its reply is lost (the
// proxy closes the link): the store asks Postgres whether the transaction
// committed, and answers the truth, OK, from the row its commit wrote.
// Never OUTCOME_UNKNOWN, one row, and a retry replays.
func TestWriteTxLostCommitReply(t *testing.T) {
	db := pgtest.NewDB(t)
	via, proxy := proxied(t, db)
	w := newTxWorld(t, db, via, pgstore.Options{})
	for i := range 3 {
		order := "o" + string(rune('1'+i))
		// The marker is in the tool's output only: the commit step's
		// bytes carry it, none before.
		proxy.LoseReplies("lose-"+order, 1)
		r := w.call(t, DraftIn{Order: order, Amount: 3}, "c-"+order, "k-"+order)
		guardtest.Want(t, r, guard.CodeOK, guard.DeliveryFresh)
		if n := w.rows(t, order); n != 1 {
			t.Fatalf("%d rows, want 1", n)
		}
		guardtest.Want(t, w.call(t, DraftIn{Order: order, Amount: 3}, "c2-"+order, "k-"+order), guard.CodeOK, guard.DeliveryLocalReplay)
	}
	if n := proxy.Lost(); n != 3 {
		t.Fatalf("the proxy lost %d replies, want 3: the test did not test", n)
	}
	w.verify(t)
}

// TestWriteTxCommitNeverArrived: the proxy holds the batch that carries
// COMMIT, then resets the connection: Postgres never got it and rolls the
// transaction back. The store's settlement finds it aborted: the write
// did not happen (UNAVAILABLE, nothing executed; status NOT_FOUND), and a
// retry runs it once.
func TestWriteTxCommitNeverArrived(t *testing.T) {
	db := pgtest.NewDB(t)
	via, proxy := proxied(t, db)
	w := newTxWorld(t, db, via, pgstore.Options{SettleTimeout: 20 * time.Second})
	block := make(chan struct{})
	w.block, w.inside = block, make(chan struct{}, 1)
	done := make(chan *guard.Result, 1)
	go func() {
		r, _ := w.try(DraftIn{Order: "o1", Amount: 3}, "c1", "k1")
		done <- r
	}()
	<-w.inside
	w.mu.Lock()
	w.block, w.inside = nil, nil
	w.mu.Unlock()
	proxy.Pause()
	close(block)
	time.Sleep(300 * time.Millisecond) // the batch is sent, and held
	proxy.Cut()
	time.Sleep(300 * time.Millisecond)
	proxy.Restore()
	r := <-done
	if r == nil || r.Code != guard.CodeUnavailable || r.Code.Outcome() != guard.OutcomeNotStarted {
		t.Fatalf("a transaction whose COMMIT never arrived: %v, want UNAVAILABLE (not started)", r)
	}
	if n := w.rows(t, "o1"); n != 0 {
		t.Fatalf("%d rows, want 0", n)
	}
	guardtest.Want(t, w.status(t, "c1", "k1"), guard.CodeNotFound, guard.DeliveryFresh)
	guardtest.Want(t, w.call(t, DraftIn{Order: "o1", Amount: 3}, "c1", "k1"), guard.CodeOK, guard.DeliveryFresh)
	if n := w.rows(t, "o1"); n != 1 {
		t.Fatalf("%d rows after the retry, want 1", n)
	}
	w.verify(t)
}
