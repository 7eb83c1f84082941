package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// RefundIn is what the model proposes: the order to draft a refund for.
type RefundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`
}

// Example declares a transactional write on the Postgres store: the draft's
// row, the outcome and the audit record commit together or not at all, so
// the model is never told OUTCOME_UNKNOWN for it. It needs a database, so
// it is compiled here and not run; pgstore.TestWriteTxCommitsWithOutcome
// runs the same steps against a real server.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // e.g. postgres://app@db/app?connect_timeout=5
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, pgstore.Options{}) // creates or migrates schema "toolguard"
	if err != nil {
		log.Fatal(err) // ErrServerTooOld, ErrPermission, or the connection's error, within Options.Timeout
	}
	draft := pgstore.WriteTx("create_refund_draft", "Draft a refund.",
		func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in RefundIn) (int64, error) {
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO refund_drafts (order_ref) VALUES ($1) RETURNING id`, in.OrderRef).Scan(&id)
			return id, err // an error rolls the row back: nothing happened
		}, nil)
	g := guard.New(toolset.MustNew(draft), store, guard.Options{})
	res, err := g.Dispatch(ctx, guard.Call{
		Principal: guard.Principal{TenantID: "acme", SubjectID: "u-1"},
		Proposal:  guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"order_ref":"ORDER-7"}`)},
		Context:   guard.ExecutionContext{CallID: "call-1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Code, res.Delivery)
}
