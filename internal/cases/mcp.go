package cases

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// RunMCP runs one case in the world through MCP: an MCP client and the
// adapters/mcp server, connected in memory, for the case's principal. Each
// step is a tools/call (a query_status step calls the server's status
// tool), with the step's ids and approval grant in _meta, and the model
// result is read back from the CallToolResult's structuredContent.
func RunMCP(ctx context.Context, c *Case, w World) *CaseReport {
	return run(ctx, c, w, mcpCarrier)
}

func mcpCarrier(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (Carry, func(), error) {
	srv, err := tgmcp.NewServer(g, tools, tgmcp.Options{Principal: &p})
	if err != nil {
		return nil, nil, err
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "toolcases", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		_ = ss.Close()
		return nil, nil, err
	}
	disconnect := func() { _ = cs.Close(); _ = ss.Close() }
	return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
		// The step's ids, as a client that owns its calls' identity sends
		// them: all three, so the server derives none.
		meta := sdk.Meta{
			tgmcp.MetaCallID:         call.Context.CallID,
			tgmcp.MetaOperationID:    call.Context.OperationID,
			tgmcp.MetaIdempotencyKey: call.Context.IdempotencyKey,
			tgmcp.MetaResponseID:     call.Context.ResponseID,
		}
		if call.Approval != "" {
			meta[tgmcp.MetaApproval] = call.Approval
		}
		params := &sdk.CallToolParams{Name: call.Proposal.Name, Arguments: json.RawMessage(call.Proposal.Arguments), Meta: meta}
		if sc != nil {
			in := map[string]any{"operation_id": sc.OperationID, "tool": nil}
			if sc.Tool != "" {
				in["tool"] = sc.Tool
			}
			params.Name, params.Arguments = toolset.StatusToolName, in
		}
		r, err := cs.CallTool(ctx, params)
		if err != nil {
			return "", err
		}
		return modelResultText(r)
	}, disconnect, nil
}

// modelResultText returns the JSON text of a CallToolResult's
// structuredContent, after checking that its content and isError say the
// same as the contract requires.
func modelResultText(r *sdk.CallToolResult) (string, error) {
	res, err := tgmcp.ModelResult(r)
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(r.StructuredContent)
	if err != nil {
		return "", err
	}
	if len(r.Content) != 1 {
		return "", fmt.Errorf("CallToolResult has %d content items, want 1", len(r.Content))
	}
	text, ok := r.Content[0].(*sdk.TextContent)
	if !ok || canonical([]byte(text.Text)) != canonical(out) {
		return "", fmt.Errorf("CallToolResult content %v is not the structuredContent %s", r.Content[0], out)
	}
	if r.IsError != (res.Code != guard.CodeOK) {
		return "", fmt.Errorf("CallToolResult isError %t with code %s", r.IsError, res.Code)
	}
	return string(out), nil
}
