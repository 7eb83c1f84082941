package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// DraftIn is the input of the tests' transactional tool: a refund draft.
type DraftIn struct {
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
	// Fail makes the tool fail after its insert: "error" (a plain error),
	// "not_found" (guard.ErrNotFound), "panic", "swallow" (a statement
	// fails and the tool returns OK anyway), "commit" (the tool commits
	// tx itself, then returns OK).
	Fail string `json:"fail"`
}

// Draft is its output.
type Draft struct {
	ID     int64  `json:"id"`
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

// txWorld is a guard over a Postgres store with the draft tool, whose
// rows are in the store's database, and a direct pool to count them.
type txWorld struct {
	g      *guard.Guard
	store  *pgstore.Store
	direct *pgxpool.Pool
	mu     sync.Mutex
	block  chan struct{} // when set, the tool waits on it after its insert
	inside chan struct{}
}

const draftsTable = `CREATE TABLE drafts (id bigserial PRIMARY KEY, op text NOT NULL, order_id text NOT NULL, amount bigint NOT NULL)`

// newTxWorld makes the world on database db, the store's pool reaching it
// at storeURL (a proxy, for fault tests).
func newTxWorld(t *testing.T, db, storeURL string, opts pgstore.Options) *txWorld {
	t.Helper()
	w := &txWorld{direct: pgtest.Pool(t, db, 4)}
	if _, err := w.direct.Exec(context.Background(), draftsTable); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(context.Background(), pgtest.Pool(t, storeURL, 16), opts)
	if err != nil {
		t.Fatal(err)
	}
	w.store = s
	draft := pgstore.WriteTx("create_draft", "Draft a refund.", func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in DraftIn) (Draft, error) {
		d := Draft{Amount: in.Amount, Note: "lose-" + in.Order}
		err := tx.QueryRow(ctx, `INSERT INTO drafts (op, order_id, amount) VALUES ($1, $2, $3) RETURNING id`,
			inv.IdempotencyKey, in.Order, in.Amount).Scan(&d.ID)
		if err != nil {
			return d, err
		}
		w.mu.Lock()
		block, inside := w.block, w.inside
		w.mu.Unlock()
		if block != nil {
			inside <- struct{}{}
			<-block
		}
		switch in.Fail {
		case "error":
			return d, errors.New("the tool failed after its insert")
		case "not_found":
			return d, guard.ErrNotFound
		case "panic":
			panic("the tool panicked after its insert")
		case "swallow":
			_, _ = tx.Exec(ctx, "SELECT no_such_column FROM drafts")
		case "commit":
			if err := tx.Commit(ctx); err == nil {
				return d, errors.New("tx.Commit committed the guard's transaction")
			}
		}
		return d, nil
	}, nil)
	w.g = guard.New(toolset.MustNew(draft), s, guard.Options{})
	return w
}

var alice = guardtest.Principal("tenant-a", "alice")

// call dispatches the draft tool with the call id and key.
func (w *txWorld) call(t *testing.T, in DraftIn, callID, key string) *guard.Result {
	t.Helper()
	res, err := w.try(in, callID, key)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (w *txWorld) try(in DraftIn, callID, key string) (*guard.Result, error) {
	args := fmt.Sprintf(`{"order":%q,"amount":%d,"fail":%q}`, in.Order, in.Amount, in.Fail)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.g.Dispatch(ctx, guard.Call{Principal: alice, Proposal: guard.Proposal{Name: "create_draft", Arguments: []byte(args)},
		Context: guard.ExecutionContext{Provider: "test", CallID: callID, IdempotencyKey: key}})
}

// status queries the operation's status, naming its tool and key.
func (w *txWorld) status(t *testing.T, op, key string) *guard.Result {
	t.Helper()
	res, err := w.g.QueryStatus(context.Background(), guard.StatusCall{Principal: alice, OperationID: op, Tool: "create_draft",
		Context: guard.ExecutionContext{Provider: "test", CallID: "status-" + op, IdempotencyKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// rows counts the drafts of the order.
func (w *txWorld) rows(t *testing.T, order string) int {
	t.Helper()
	var n int
	if err := w.direct.QueryRow(context.Background(), "SELECT count(*) FROM drafts WHERE order_id = $1", order).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// verify checks the tenant's audit chain and returns its records.
func (w *txWorld) verify(t *testing.T) []guard.AuditRecord {
	t.Helper()
	n, err := guard.VerifyAudit(context.Background(), w.store, alice.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := w.store.Audit(context.Background(), alice.TenantID, 0, int(n))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestWriteTxCommitsWithOutcome: the tool's row, the outcome and the audit
// record commit together; a retry replays and inserts nothing.
func TestWriteTxCommitsWithOutcome(t *testing.T) {
	db := pgtest.NewDB(t)
	w := newTxWorld(t, db, db, pgstore.Options{})
	first := w.call(t, DraftIn{Order: "o1", Amount: 5}, "c1", "k1")
	guardtest.Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	for _, c := range []struct{ call, key string }{{"c1", "k1"}, {"c2", "k1"}, {"c1", ""}} {
		r := w.call(t, DraftIn{Order: "o1", Amount: 5}, c.call, c.key)
		guardtest.Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
		if string(r.Data) != string(first.Data) {
			t.Fatalf("replay %v: %s, want %s", c, r.Data, first.Data)
		}
	}
	guardtest.Want(t, w.status(t, "c1", "k1"), guard.CodeOK, guard.DeliveryLocalReplay)
	if n := w.rows(t, "o1"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	recs := w.verify(t)
	if len(recs) != 5 || recs[0].Code != guard.CodeOK || recs[0].SideEffect != guard.SideEffectYes {
		t.Fatalf("audit: %d records, the first %s/%s; want 5, the first OK/yes", len(recs), recs[0].Code, recs[0].SideEffect)
	}
}

// TestWriteTxFailureLeavesNothing: whatever way the tool fails after its
// insert, its row is rolled back with the reservation: the write did not
// happen, the status query says so, and a retry runs it once.
func TestWriteTxFailureLeavesNothing(t *testing.T) {
	db := pgtest.NewDB(t)
	w := newTxWorld(t, db, db, pgstore.Options{})
	for _, c := range []struct {
		fail string
		want guard.Code
	}{
		{"error", guard.CodeUnavailable},
		{"not_found", guard.CodeNotFound},
		{"panic", guard.CodeUnavailable},
		{"swallow", guard.CodeUnavailable},
	} {
		order, key := "order-"+c.fail, "key-"+c.fail
		r := w.call(t, DraftIn{Order: order, Amount: 1, Fail: c.fail}, "c-"+c.fail, key)
		guardtest.Want(t, r, c.want, guard.DeliveryFresh)
		if n := w.rows(t, order); n != 0 {
			t.Fatalf("%s: %d rows after the tool failed, want 0", c.fail, n)
		}
		// The status query: the terminal NOT_FOUND replayed, or that
		// nothing ran.
		st := w.status(t, "c-"+c.fail, key)
		guardtest.Want(t, st, guard.CodeNotFound, statusDelivery(c.want))
		// Corrected, it runs once (a new call id: NOT_FOUND is terminal
		// for its call id).
		guardtest.Want(t, w.call(t, DraftIn{Order: order, Amount: 1}, "c2-"+c.fail, key), guard.CodeOK, guard.DeliveryFresh)
		if n := w.rows(t, order); n != 1 {
			t.Fatalf("%s: %d rows after the retry, want 1", c.fail, n)
		}
	}
	// The tool commits tx itself: refused, and its row commits only with
	// the outcome.
	guardtest.Want(t, w.call(t, DraftIn{Order: "o-commit", Amount: 1, Fail: "commit"}, "c-commit", "k-commit"), guard.CodeOK, guard.DeliveryFresh)
	if n := w.rows(t, "o-commit"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	for _, r := range w.verify(t) {
		if r.Code == guard.CodeOutcomeUnknown || r.SideEffect == guard.SideEffectUnknown {
			t.Fatalf("record %d: %s/%s: a transactional write is never unknown", r.Seq, r.Code, r.SideEffect)
		}
	}
}

// statusDelivery is how a status query's NOT_FOUND comes for an
// operation that ended with code: a terminal code's replayed, fresh for
// one that never started.
func statusDelivery(code guard.Code) guard.Delivery {
	if code.Terminal() {
		return guard.DeliveryLocalReplay
	}
	return guard.DeliveryFresh
}

// TestWriteTxConcurrentDuplicates: callers of one key while the first is
// inside its transaction wait for its commit, then replay it: one row,
// never IN_PROGRESS.
func TestWriteTxConcurrentDuplicates(t *testing.T) {
	db := pgtest.NewDB(t)
	w := newTxWorld(t, db, db, pgstore.Options{})
	block := make(chan struct{})
	w.block, w.inside = block, make(chan struct{}, 1)
	first := make(chan *guard.Result, 1)
	go func() {
		r, _ := w.try(DraftIn{Order: "o1", Amount: 7}, "c0", "k1")
		first <- r
	}()
	<-w.inside
	w.mu.Lock()
	w.block, w.inside = nil, nil
	w.mu.Unlock()
	const n = 12
	results := make([]*guard.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], _ = w.try(DraftIn{Order: "o1", Amount: 7}, fmt.Sprintf("c%d", i+1), "k1") })
	}
	time.Sleep(100 * time.Millisecond) // they queue on the key's lock
	close(block)
	guardtest.Want(t, <-first, guard.CodeOK, guard.DeliveryFresh)
	wg.Wait()
	for i, r := range results {
		if r == nil {
			t.Fatalf("caller %d: no result", i+1)
		}
		guardtest.Want(t, r, guard.CodeOK, guard.DeliveryLocalReplay)
	}
	if got := w.rows(t, "o1"); got != 1 {
		t.Fatalf("%d rows, want 1", got)
	}
	if recs := w.verify(t); len(recs) != n+1 {
		t.Fatalf("%d audit records, want %d", len(recs), n+1)
	}
}

// TestWriteTxStepRunAgain: a durable step (guard.Call.Step) whose
// transactional write committed, run again after its process died before
// the engine recorded the step, replays the write: the same call as the
// same step finds its reservation committed, and the tool does not run
// again.
func TestWriteTxStepRunAgain(t *testing.T) {
	db := pgtest.NewDB(t)
	w := newTxWorld(t, db, db, pgstore.Options{})
	call := func() *guard.Result {
		t.Helper()
		res, err := w.g.Dispatch(context.Background(), guard.Call{Principal: alice, Step: "wf-1/step-3",
			Proposal: guard.Proposal{Name: "create_draft", Arguments: []byte(`{"order":"o1","amount":2,"fail":""}`)},
			Context:  guard.ExecutionContext{Provider: "test", CallID: "c1", Scope: "wf-1"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call()
	guardtest.Want(t, first, guard.CodeOK, guard.DeliveryFresh)
	again := call()
	guardtest.Want(t, again, guard.CodeOK, guard.DeliveryLocalReplay)
	if string(again.Data) != string(first.Data) {
		t.Fatalf("the step run again got %s, want %s", again.Data, first.Data)
	}
	if n := w.rows(t, "o1"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	w.verify(t)
}

// TestWriteTxInCallersTransaction: under InTx, a transactional write runs
// in the caller's transaction (as a DBOS transaction would hold it): its
// row, its records and whatever else the caller wrote there commit
// together when the caller commits, and vanish together when it rolls
// back; a tool that fails leaves nothing of its own.
func TestWriteTxInCallersTransaction(t *testing.T) {
	db := pgtest.NewDB(t)
	w := newTxWorld(t, db, db, pgstore.Options{})
	ctx := context.Background()
	dispatchIn := func(tx pgx.Tx, in DraftIn, callID, key string) *guard.Result {
		t.Helper()
		args := fmt.Sprintf(`{"order":%q,"amount":%d,"fail":%q}`, in.Order, in.Amount, in.Fail)
		res, err := w.g.Dispatch(pgstore.InTx(ctx, tx), guard.Call{Principal: alice,
			Proposal: guard.Proposal{Name: "create_draft", Arguments: []byte(args)},
			Context:  guard.ExecutionContext{Provider: "test", CallID: callID, IdempotencyKey: key}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, commit := range []bool{true, false} {
		order := fmt.Sprintf("o-%v", commit)
		tx, err := w.direct.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		guardtest.Want(t, dispatchIn(tx, DraftIn{Order: order, Amount: 4}, "c-"+order, "k-"+order), guard.CodeOK, guard.DeliveryFresh)
		if _, err := tx.Exec(ctx, "INSERT INTO drafts (op, order_id, amount) VALUES ('caller', $1, 0)", order+"-caller"); err != nil {
			t.Fatal(err)
		}
		if n := w.rows(t, order); n != 0 {
			t.Fatalf("the row is seen before the caller committed: %d", n)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want, status := 0, guard.CodeNotFound
		if commit {
			want, status = 1, guard.CodeOK
		}
		if n, nc := w.rows(t, order), w.rows(t, order+"-caller"); n != want || nc != want {
			t.Fatalf("commit %v: %d rows of the tool and %d of the caller, want %d of each", commit, n, nc, want)
		}
		if s := w.status(t, "c-"+order, "k-"+order); s.Code != status {
			t.Fatalf("commit %v: status %s, want %s", commit, s, status)
		}
	}
	// Rolled back, it did not happen: a retry runs it once.
	guardtest.Want(t, w.call(t, DraftIn{Order: "o-false", Amount: 4}, "c-o-false", "k-o-false"), guard.CodeOK, guard.DeliveryFresh)
	if n := w.rows(t, "o-false"); n != 1 {
		t.Fatalf("%d rows after the retry, want 1", n)
	}
	// A tool that fails in the caller's transaction leaves nothing of its
	// own, and its key free, once the caller commits.
	tx, err := w.direct.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	guardtest.Want(t, dispatchIn(tx, DraftIn{Order: "o-fail", Amount: 1, Fail: "error"}, "c-fail", "k-fail"), guard.CodeUnavailable, guard.DeliveryFresh)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.rows(t, "o-fail"); n != 0 {
		t.Fatalf("%d rows of a tool that failed, want 0", n)
	}
	guardtest.Want(t, w.status(t, "c-fail", "k-fail"), guard.CodeNotFound, guard.DeliveryFresh)
	guardtest.Want(t, w.call(t, DraftIn{Order: "o-fail", Amount: 1}, "c-fail-2", "k-fail"), guard.CodeOK, guard.DeliveryFresh)
	w.verify(t)
}
