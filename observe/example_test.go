package observe_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/toolset"
)

type lookupIn struct {
	Order string `json:"order" jsonschema:"description=The order's id."`
}

// Log every dispatch of a guard: Logging is an interceptor, given to the
// guard in its options (Tracing and Metrics are given the same way).
func Example() {
	lookup := toolset.Read("lookup_order", "Look an order up.", func(_ context.Context, _ *guard.Invocation, in lookupIn) (string, error) {
		return "shipped", nil
	}, nil)
	tools := toolset.MustNew(lookup)

	// A text log on stdout of a few attributes and no time, so that the
	// output is stable. A result that is OK logs at Debug.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || (a.Key != "msg" && a.Key != "tool" && a.Key != "code" && a.Key != "delivery" && a.Key != "level") {
				return slog.Attr{}
			}
			return a
		},
	}))
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{
		Interceptors: []guard.Interceptor{observe.Logging(observe.Options{Logger: logger, Tools: tools})},
	})

	res, _ := g.Dispatch(context.Background(), guard.Call{
		Principal: guard.Principal{TenantID: "acme", SubjectID: "user-1"},
		Proposal:  guard.Proposal{Name: "lookup_order", Arguments: []byte(`{"order":"42"}`)},
		Context:   guard.ExecutionContext{CallID: "call-1"},
	})
	fmt.Println(res.Code)
	// Output:
	// level=DEBUG msg="toolguard dispatch" tool=lookup_order code=OK delivery=fresh
	// OK
}
