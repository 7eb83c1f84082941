package tgeino_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// A host function that fails or panics (Principal, Scope, Call) stops the
// call before the guard: Eino's run ends with the host's error, nothing
// runs, nothing is audited, and no panic reaches the host.
func TestHostFailures(t *testing.T) {
	for name, h := range frameworktest.FailingHooks() {
		t.Run(name, func(t *testing.T) {
			shop := newShop()
			set := shop.tools(false)
			store := guard.NewMemStore(guard.MemStoreOptions{})
			opts := host.Options{Principal: h.Principal, Scope: h.Scope, Call: h.Call}
			eg, err := tgeino.New(guard.New(set, store, guard.Options{}), set, opts)
			if err != nil {
				t.Fatal(err)
			}
			run := toolsGraph(t, eg.ToolsNodeConfig())
			ctx := host.WithScope(context.Background(), "run-host")
			if name != frameworktest.NoPrincipal {
				ctx = host.WithPrincipal(ctx, acme)
			}
			_, err = run.Invoke(ctx, toolCalls([3]string{"c1", "create_refund_draft", refundArgs}))
			if err == nil || !strings.Contains(err.Error(), "tgeino:") {
				t.Fatalf("Invoke error = %v, want the host's failure", err)
			}
			recs, _, _ := store.Audit(context.Background(), "acme", 0, 10)
			if len(recs) != 0 || shop.sideEffects() != 0 {
				t.Errorf("%d audit records, %d drafts; want none", len(recs), shop.sideEffects())
			}
		})
	}
}
