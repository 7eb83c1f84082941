package tgmcp_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
)

// Serve the order tools through the guard over MCP, and call them from an
// MCP client connected in memory. Over stdio it is
// srv.Run(ctx, &mcp.StdioTransport{}); over HTTP, srv.Handler(verify, nil).
func Example() {
	mr, _ := miniredis.Run() // any Redis will do
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, store, guard.Options{})
	user := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"} // the process's user, never the client's say
	srv, _ := tgmcp.NewServer(g, tools, tgmcp.Options{Principal: &user})

	ctx := context.Background()
	serverSide, clientSide := sdk.NewInMemoryTransports()
	ss, _ := srv.Connect(ctx, serverSide)
	defer ss.Close()
	cs, _ := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "v1"}, nil).Connect(ctx, clientSide, nil)
	defer cs.Close()

	list, _ := cs.ListTools(ctx, nil) // listed by name
	for _, t := range list.Tools {
		fmt.Println("tool:", t.Name, "readOnly:", t.Annotations.ReadOnlyHint)
	}
	for _, ref := range []string{"ORDER-7", "ORDER-9"} {
		r, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_ref": ref}})
		res, _ := tgmcp.ModelResult(r)
		fmt.Printf("get_order %s -> isError %t: %s\n", ref, r.IsError, res)
	}
	r, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "create_refund_draft",
		Arguments: map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}})
	res, _ := tgmcp.ModelResult(r)
	fmt.Println("create_refund_draft ->", res.Code, "(this client cannot elicit)")
	// Output:
	// tool: create_refund_draft readOnly: false
	// tool: get_order readOnly: true
	// tool: query_operation_status readOnly: true
	// get_order ORDER-7 -> isError false: {"contract":"tool-model-result-v2","code":"OK","status":"succeeded","outcome":"committed","recovery":"none","delivery":"fresh","data":{"order_ref":"ORDER-7","status":"paid"}}
	// get_order ORDER-9 -> isError true: {"contract":"tool-model-result-v2","code":"NOT_FOUND","status":"failed","outcome":"not_started","recovery":"none","delivery":"fresh","data":null,"message":"No such resource."}
	// create_refund_draft -> APPROVAL_REQUIRED (this client cannot elicit)
}
