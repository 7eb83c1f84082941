package guard_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/toolset"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"description=Who to greet."`
}

// Declare a tool from a typed function, put a guard over it with a Redis
// store, and dispatch the model's calls.
func Example() {
	mr, _ := miniredis.Run() // any Redis will do: miniredis, a server, a cluster
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})

	greet := toolset.Read("greet", "Greet someone.", func(_ context.Context, _ *guard.Invocation, in greetIn) (string, error) {
		return "hello, " + in.Name, nil
	}, nil)

	g := guard.New(toolset.MustNew(greet), store, guard.Options{})

	user := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model
	for _, args := range []string{`{"name":"Ada"}`, `{"name":42}`} {
		res, _ := g.Dispatch(context.Background(), guard.Call{
			Principal: user,
			Proposal:  guard.Proposal{Name: "greet", Arguments: []byte(args)},
			Context:   guard.ExecutionContext{CallID: "call-" + args[9:11]},
		})
		fmt.Println(res)
	}
	// Output:
	// {"contract":"tool-model-result-v2","code":"OK","status":"succeeded","outcome":"committed","recovery":"none","delivery":"fresh","data":"hello, Ada"}
	// {"contract":"tool-model-result-v2","code":"INVALID_ARGUMENTS","status":"failed","outcome":"not_started","recovery":"correct_input","delivery":"fresh","data":null,"message":"The arguments do not match the tool's schema: at /name: got number, want string."}
}

// A Result is the tool-model-result-v2 JSON the model receives; its status,
// outcome and recovery follow from its code.
func ExampleResult() {
	res := guard.Result{Code: guard.CodeOutcomeUnknown, OperationID: "op-7"}
	fmt.Println(res.Status(), res.Outcome(), res.Recovery())
	fmt.Println(strings.Contains(res.String(), `"operation_id":"op-7"`))
	// Output:
	// unknown unknown query_status
	// true
}
