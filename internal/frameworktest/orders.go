package frameworktest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/refunddemo"
	"github.com/toolguard/toolguard/toolset"
)

// Orders is what an integration's agent tests run against: the
// conformance order service (ORDER-7 is tenant-a/user-1's, ORDER-9
// tenant-b's), its tools, and a guard over them on guard.MemStore that signs
// grants with Signer.
type Orders struct {
	Svc    *orders.Service
	Store  *guard.MemStore
	Signer *guard.Signer
	Tools  *toolset.Set
	Guard  *guard.Guard
}

// NewOrders returns a fresh Orders whose signer has the key.
func NewOrders(t testing.TB, key []byte) *Orders {
	t.Helper()
	o := &Orders{Svc: orders.NewService(), Store: guard.NewMemStore(guard.MemStoreOptions{})}
	var err error
	if o.Signer, err = guard.NewSigner(key); err != nil {
		t.Fatal(err)
	}
	o.Tools = orders.Tools(o.Svc)
	o.Guard = guard.New(o.Tools, o.Store, guard.Options{Signer: o.Signer})
	return o
}

// WantApprovedWrite checks the tenant's audit log in store: exactly one
// record of a side effect, approved by approver and carried by provider,
// and an intact hash chain.
func WantApprovedWrite(t testing.TB, store guard.AuditStore, tenantID, approver, provider string) {
	t.Helper()
	recs, _, err := store.Audit(t.Context(), tenantID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var approved []string
	for _, r := range recs {
		if r.SideEffect == guard.SideEffectYes {
			approved = append(approved, string(r.Body))
		}
	}
	if len(approved) != 1 || !strings.Contains(approved[0], `"approver":"`+approver+`"`) || !strings.Contains(approved[0], `"`+provider+`"`) {
		t.Errorf("audit records with a side effect = %v, want one approved by %s, carried by %s", approved, approver, provider)
	}
	if _, err := guard.VerifyAudit(t.Context(), store, tenantID); err != nil {
		t.Errorf("audit chain: %v", err)
	}
}

// WantDeclared checks the tools a framework offered the model, their JSON
// schemas by name: every tool of the order service with the schema the
// guard validates against, and the status tool.
func WantDeclared(t testing.TB, schemas map[string][]byte) {
	t.Helper()
	for _, d := range orders.Tools(orders.NewService()).Tools() {
		got, ok := schemas[d.Name()]
		if !ok {
			t.Errorf("tool %s not offered", d.Name())
			continue
		}
		if want := d.Schema().JSON(); CanonicalJSON(t, got) != CanonicalJSON(t, want) {
			t.Errorf("%s schema = %s, want %s", d.Name(), got, want)
		}
	}
	if _, ok := schemas[toolset.StatusToolName]; !ok {
		t.Errorf("the status tool is not offered")
	}
}

// CanonicalJSON returns b decoded and encoded again, so that two JSON
// texts of the same value compare equal.
func CanonicalJSON(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// WantDraftOnce runs an example of the refund story (internal/refunddemo)
// with the human's yes and with their no, run returning how many drafts
// the shop made: approved, one draft however often the model and the user
// repeat the call; declined, none.
func WantDraftOnce(t testing.TB, run func(approve bool) (drafts int, err error)) {
	t.Helper()
	for _, approve := range []bool{true, false} {
		n, err := run(approve)
		if err != nil {
			t.Fatalf("approve=%v: %v", approve, err)
		}
		if err := refunddemo.WantDrafts(approve, n); err != nil {
			t.Errorf("approve=%v: %v", approve, err)
		}
	}
}

// WantReplay checks the result of call id, read with err, as a repeat of
// a write whose first result was first: OK, replayed locally, with
// first's data.
func WantReplay(t testing.TB, id string, res *guard.Result, err error, first *guard.Result) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay || string(res.Data) != string(first.Data) {
		t.Errorf("repeated call %s = %s, want the first draft replayed", id, res)
	}
}

// Answer returns the last of answers whose id (by idOf) is id, or the
// last of all when id is "", and fails the test when there is none, as
// "no <what> <id>".
func Answer[T any](t testing.TB, what string, answers []T, id string, idOf func(T) string) T {
	t.Helper()
	var last T
	found := false
	for _, a := range answers {
		if id == "" || idOf(a) == id {
			last, found = a, true
		}
	}
	if !found {
		t.Fatalf("no %s %q", what, id)
	}
	return last
}

// Last returns the last of s, or the zero value when s is empty.
func Last[T any](s []T) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	return s[len(s)-1]
}
