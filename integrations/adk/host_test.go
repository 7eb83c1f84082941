package tgadk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgadk "github.com/toolguard/toolguard/integrations/adk"
	"github.com/toolguard/toolguard/internal/orders"
)

// TestHostFailures: a Principal hook that fails, panics or gives no valid
// principal stops the call before the guard: nothing runs, nothing is
// audited, no panic reaches the host, and the model is not shown the
// host's reason.
func TestHostFailures(t *testing.T) {
	hooks := map[string]func(context.Context) (guard.Principal, error){
		"error": func(context.Context) (guard.Principal, error) {
			return guard.Principal{}, errors.New("session db at 10.0.0.7 down")
		},
		"panic":   func(context.Context) (guard.Principal, error) { panic("session db at 10.0.0.7 down") },
		"invalid": func(context.Context) (guard.Principal, error) { return guard.Principal{TenantID: "tenant-a"}, nil },
	}
	for name, hook := range hooks {
		t.Run(name, func(t *testing.T) {
			svc, store := orders.NewService(), guard.NewMemStore(guard.MemStoreOptions{})
			tools := orders.Tools(svc)
			a, err := tgadk.New(guard.New(tools, store, guard.Options{}), tools, tgadk.Options{Options: host.Options{Principal: hook,
				Call: func(context.Context, *guard.Call) { panic("the host's call hook must not be reached") }}})
			if err != nil {
				t.Fatal(err)
			}
			m := &fakeModel{}
			r := newRunner(t, a, m)
			m.push(calls(&genai.FunctionCall{ID: "r1", Name: "get_order", Args: map[string]any{"order_ref": "ORDER-7"}}))
			evs := run(t, r, "user-1", "s1", genai.NewContentFromText("show ORDER-7", genai.RoleUser))
			rs := responses(evs)
			if len(rs) != 1 {
				t.Fatalf("function responses = %d, want 1", len(rs))
			}
			msg, _ := rs[0].Response["error"].(string)
			if msg != host.ErrNoPrincipal.Error() || strings.Contains(msg, "10.0.0.7") {
				t.Errorf("function response = %v, want ADK's error with ErrNoPrincipal's text only", rs[0].Response)
			}
			recs, _, _ := store.Audit(t.Context(), "tenant-a", 0, 10)
			if len(recs) != 0 {
				t.Errorf("%d audit records, want none", len(recs))
			}
		})
	}
}

// TestNewRefuses: New refuses what would leave calls unguarded.
func TestNewRefuses(t *testing.T) {
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	p := func(context.Context) (guard.Principal, error) { return guard.Principal{}, nil }
	if _, err := tgadk.New(g, tools, tgadk.Options{}); err == nil {
		t.Error("New without a Principal function")
	}
	if _, err := tgadk.New(nil, tools, tgadk.Options{Options: host.Options{Principal: p}}); err == nil {
		t.Error("New without a guard")
	}
	other := guard.New(orders.NoopTools(), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	if _, err := tgadk.New(other, orders.Tools(orders.NewService()), tgadk.Options{Options: host.Options{Principal: p}}); err == nil {
		// The guard would validate and run its own tools, not the ones
		// the model is offered: refused, as on every entry point.
		t.Error("New with a guard over other tools of the same names")
	}
	empty := guard.New(tgadk.Join(nil), guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	if _, err := tgadk.New(empty, tools, tgadk.Options{Options: host.Options{Principal: p}}); err == nil {
		t.Error("New with a guard that finds none of the set's tools")
	}
	if _, err := tgadk.New(g, tools, tgadk.Options{Options: host.Options{Principal: p, StatusTool: "get_order"}}); err == nil {
		t.Error("New with a status tool named like a set tool")
	}
	if _, err := tgadk.New(g, tools, tgadk.Options{Options: host.Options{Principal: p, StatusTool: "no spaces, please"}}); err == nil {
		t.Error("New with a status tool name toolset refuses")
	}
}
