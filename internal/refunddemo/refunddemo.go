// Package refunddemo is the offline refund example that every framework
// module's examples/refund runs (integrations/adk, eino, genkit, and the
// durable engines'): a shop whose tools run behind the guard, and the
// script its fake model plays, so that each example keeps only the code
// that speaks its framework. (examples/internal/demo, the top-level
// examples' scaffolding, is internal to examples/ and needs real provider
// SDKs; this package needs neither.)
//
// The story: the user asks to refund a duplicate charge of ORDER-7; the
// model reads the order, asks to draft the refund (a write that needs a
// human's approval), and repeats the call once the draft is made, as
// models do; the draft is made once, and replayed after.
package refunddemo

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// Ask is the user's request.
const Ask = "I was charged twice for ORDER-7, please refund the duplicate."

// Instruction is the agent's system prompt.
const Instruction = "You help customers with refunds."

// OrderIn is get_order's input.
type OrderIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order\\, e.g. ORDER-7."` // which order
}

// RefundIn is create_refund_draft's input.
type RefundIn struct {
	OrderRef string `json:"order_ref" jsonschema:"description=The order to refund."`           // which order
	Reason   string `json:"reason" jsonschema:"enum=duplicate,enum=damaged,enum=not_received"` // why
}

// Order is get_order's output.
type Order struct {
	OrderRef string `json:"order_ref"` // which order
	Status   string `json:"status"`    // paid, shipped, …
}

// Draft is create_refund_draft's output.
type Draft struct {
	DraftID  string `json:"draft_id"`  // the shop's id of the draft
	OrderRef string `json:"order_ref"` // the order refunded
}

// Shop is the downstream system: the orders per tenant (ORDER-7 is
// acme's, ORDER-9 globex's), and the refund drafts made, by the guard's
// downstream idempotency key.
type Shop struct {
	mu     sync.Mutex
	out    io.Writer
	owners map[string]string // order -> tenant
	drafts map[string]Draft  // downstream idempotency key -> draft
}

// NewShop returns a shop that tells out of each draft it makes, as
// "  shop: drafted DRAFT-1 for ORDER-7 (duplicate)".
func NewShop(out io.Writer) *Shop {
	return &Shop{out: out, owners: map[string]string{"ORDER-7": "acme", "ORDER-9": "globex"}, drafts: map[string]Draft{}}
}

// Drafts returns how many refund drafts the shop made.
func (s *Shop) Drafts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.drafts)
}

// owns authorizes a call on an order: another tenant's order does not
// exist for this one.
func (s *Shop) owns(inv *guard.Invocation, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[ref] != inv.Principal.TenantID {
		return guard.ErrNotFound
	}
	return nil
}

// Tools returns the shop's tools: get_order, a read, and
// create_refund_draft, a write that needs a human's approval, dedupes by
// the guard's downstream key, and has a receipt.
func (s *Shop) Tools() *toolset.Set {
	get := toolset.Read("get_order", "Look up one of the customer's orders.",
		func(_ context.Context, _ *guard.Invocation, in OrderIn) (Order, error) {
			return Order{OrderRef: in.OrderRef, Status: "paid"}, nil
		}, &toolset.Options[OrderIn, Order]{Authorize: func(_ context.Context, inv *guard.Invocation, in OrderIn) error {
			return s.owns(inv, in.OrderRef)
		}})
	refund := toolset.Write("create_refund_draft", "Draft a refund of an order; a human approves it first.",
		func(_ context.Context, inv *guard.Invocation, in RefundIn) (Draft, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if d, ok := s.drafts[inv.IdempotencyKey]; ok { // the downstream system dedupes by the key too
				return d, nil
			}
			d := Draft{DraftID: fmt.Sprintf("DRAFT-%d", len(s.drafts)+1), OrderRef: in.OrderRef}
			s.drafts[inv.IdempotencyKey] = d
			fmt.Fprintf(s.out, "  shop: drafted %s for %s (%s)\n", d.DraftID, in.OrderRef, in.Reason)
			return d, nil
		}, &toolset.Options[RefundIn, Draft]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"},
			Authorize: func(_ context.Context, inv *guard.Invocation, in RefundIn) error {
				return s.owns(inv, in.OrderRef)
			},
			Receipt: func(_ context.Context, inv *guard.Invocation) (Draft, bool, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				d, ok := s.drafts[inv.IdempotencyKey]
				return d, ok, nil
			}})
	return toolset.MustNew(get, refund)
}

// Guard returns the shop's tools behind a guard that keeps its records in
// memory, and the signer of its grants, whose key is fresh to the process.
func (s *Shop) Guard() (*guard.Guard, *toolset.Set, *guard.Signer) {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails: crypto/rand crashes the program instead
	signer, err := guard.NewSigner(key)
	if err != nil {
		panic(err) // a 32-byte key is long enough
	}
	tools := s.Tools()
	return guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Signer: signer}), tools, signer
}

// Reply is the scripted model's next turn: a call of Tool with Arguments,
// or, when Tool is "", the answer Text.
type Reply struct {
	Tool      string
	Arguments map[string]any
	Text      string
}

// Next is the scripted model: it decides its reply from the conversation's
// last turn, tool being the name of the tool whose result that turn holds
// ("" when it holds none, as a user's turn), res that result as the model
// reads it and err why it could not be read. It reads the order, drafts
// the refund, repeats the draft call once the draft is fresh (as models
// do), and then answers with the draft, or with why there is none. Like
// Gemini it gives its calls no ids: the framework makes them up.
func Next(tool string, res *guard.Result, err error) Reply {
	refund := Reply{Tool: "create_refund_draft", Arguments: map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}}
	switch {
	case tool == "":
		return Reply{Tool: "get_order", Arguments: map[string]any{"order_ref": "ORDER-7"}}
	case err != nil:
		return Reply{Text: "Something went wrong."}
	case tool == "get_order" && res.Code == guard.CodeOK:
		return refund
	case res.Code == guard.CodeOK && res.Delivery == guard.DeliveryFresh:
		return refund // the model repeats itself
	case res.Code == guard.CodeOK:
		return Reply{Text: "Your refund is drafted: " + string(res.Data) + "."}
	default:
		return Reply{Text: "I could not draft the refund: " + res.Message}
	}
}

// Main is an example's main: it reads the human's answer from the
// -approve flag (yes by default), runs the example with it (run returns
// how many drafts the shop made), and exits 1 with the error if it fails,
// or if the shop did not make exactly one draft when approved and none
// when denied (WantDrafts).
func Main(run func(approve bool) (drafts int, err error)) {
	approve := flag.Bool("approve", true, "the human's answer to the refund's approval")
	flag.Parse()
	drafts, err := run(*approve)
	if err == nil {
		err = WantDrafts(*approve, drafts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "refund:", err)
		os.Exit(1)
	}
}

// WantDrafts says what is wrong with drafts, the drafts the shop made in a
// run whose human answered approve: an approved refund is drafted once,
// however often the model asks, and a denied one never.
func WantDrafts(approve bool, drafts int) error {
	want := 0
	if approve {
		want = 1
	}
	if drafts != want {
		return fmt.Errorf("the shop made %d drafts; want %d", drafts, want)
	}
	return nil
}
