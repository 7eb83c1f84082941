package tgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// ImportOptions configure Import.
type ImportOptions struct {
	// Authorize decides whether inv.Principal may make this call of the
	// remote tool named tool; it returns guard.ErrNotFound when not (any
	// error fails closed as NOT_FOUND). It is required: the remote server
	// does not know the guard's principals.
	Authorize func(ctx context.Context, tool string, inv *guard.Invocation) error
	// NoApproval reports the write tools the host lets run without a
	// human's approval. By default every write needs one.
	NoApproval func(t *sdk.Tool) bool
}

// RemoteTools are the tools of a remote MCP server as guard tools. It
// implements guard.Tools, for guard.New; Set makes them a toolset.Set, for
// agentloop.New or next to a host's own tools.
type RemoteTools struct {
	byName map[string]*RemoteTool
	order  []*RemoteTool
}

var _ guard.Tools = (*RemoteTools)(nil)

// Lookup implements guard.Tools: the exact name, or nil.
func (rt *RemoteTools) Lookup(name string) guard.Tool {
	if t, ok := rt.byName[name]; ok {
		return t
	}
	return nil
}

// Tools returns the tools in the order the server listed them.
func (rt *RemoteTools) Tools() []*RemoteTool { return append([]*RemoteTool(nil), rt.order...) }

// Set returns the tools, in the order the server listed them, as a
// toolset.Set, which agentloop.New takes like any other; add the host's
// own tools with its With. It fails, naming the tool, when a remote name
// is not one model providers accept (toolset.New's rule,
// ^[a-zA-Z0-9_-]{1,64}$: MCP also allows dots and longer names).
func (rt *RemoteTools) Set() (*toolset.Set, error) {
	tools := make([]toolset.Declared, len(rt.order))
	for i, t := range rt.order {
		tools[i] = t
	}
	s, err := toolset.New(tools...)
	if err != nil {
		return nil, fmt.Errorf("mcp: the remote tools cannot be offered to a model: %w", err)
	}
	return s, nil
}

// RemoteTool is one tool of a remote MCP server, called through its client
// session after the guard's checks. It is a host.Imported (which gives it
// guard.Tool and toolset.Declared: its Schema is the server's inputSchema,
// not Strict, validating the arguments before anything is sent; its
// Authorize is ImportOptions.Authorize; no argument is logged, they are
// only fingerprinted; every receipt lookup is inconclusive, since MCP has
// none, so an unknown outcome of a remote write stays unknown until a
// human settles it) whose run is the remote tools/call.
type RemoteTool struct {
	*host.Imported
	cs  *sdk.ClientSession
	def *sdk.Tool
}

var _ toolset.Declared = (*RemoteTool)(nil)

// Import lists the tools of the session's server and returns them as guard
// tools. Each tool's inputSchema is compiled once (toolset.CompileSchema:
// JSON Schema 2020-12 unless it names its draft) and validates the
// arguments before anything is sent. A tool with readOnlyHint is a read;
// every other tool is a write, which needs approval unless opts.NoApproval
// says otherwise.
func Import(ctx context.Context, cs *sdk.ClientSession, opts ImportOptions) (*RemoteTools, error) {
	if opts.Authorize == nil {
		return nil, errors.New("mcp: Import needs ImportOptions.Authorize")
	}
	rt := &RemoteTools{byName: map[string]*RemoteTool{}}
	for def, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: listing the remote tools: %w", err)
		}
		if _, dup := rt.byName[def.Name]; dup {
			return nil, fmt.Errorf("mcp: the remote server lists tool %q twice", def.Name)
		}
		t, err := newRemoteTool(cs, def, opts)
		if err != nil {
			return nil, err
		}
		rt.byName[def.Name] = t
		rt.order = append(rt.order, t)
	}
	return rt, nil
}

func newRemoteTool(cs *sdk.ClientSession, def *sdk.Tool, opts ImportOptions) (*RemoteTool, error) {
	raw, err := json.Marshal(def.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("mcp: tool %q inputSchema: %w", def.Name, err)
	}
	t := &RemoteTool{cs: cs, def: def}
	read := def.Annotations != nil && def.Annotations.ReadOnlyHint
	t.Imported, err = host.Import(def.Name, t.call, host.ImportOptions{Description: def.Description, Schema: raw,
		Authorize:  opts.Authorize,
		Read:       read,
		NoApproval: !read && opts.NoApproval != nil && opts.NoApproval(def),
		Receipt:    noReceipt,
	})
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	return t, nil
}

// InputSchema returns the remote server's input schema, the one arguments
// are validated against.
func (t *RemoteTool) InputSchema() json.RawMessage { return t.Schema().JSON() }

// Definition returns the tool as the remote server listed it.
func (t *RemoteTool) Definition() *sdk.Tool { return t.def }

// Idempotent reports the server's idempotentHint: calling the tool again
// with the same arguments has no further effect. The guard runs a write at
// most once per idempotency key whatever the hint says.
func (t *RemoteTool) Idempotent() bool {
	return t.def.Annotations != nil && t.def.Annotations.IdempotentHint
}

// call is the tool's run (host.ExecFunc): the remote tools/call, with the
// downstream idempotency key in _meta (MetaIdempotencyKey). A connection
// refused before the request was sent is TIMEOUT_BEFORE_EXECUTE; a reply
// that never came (the deadline, a connection lost after sending) is
// OUTCOME_UNKNOWN for a write; a remote tool error is OUTCOME_UNKNOWN for a
// write too, unless the remote is a toolguard server whose result says it
// did not start.
func (t *RemoteTool) call(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	params := &sdk.CallToolParams{Name: t.def.Name, Arguments: json.RawMessage(inv.Arguments)}
	if inv.IdempotencyKey != "" {
		params.Meta = sdk.Meta{MetaIdempotencyKey: inv.IdempotencyKey}
	}
	res, err := t.cs.CallTool(ctx, params)
	if err != nil {
		return nil, callError(err)
	}
	return remoteOutput(res)
}

// callError classifies a tools/call that got no result.
func callError(err error) error {
	var werr *jsonrpc.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return guard.NotStarted(err) // nothing reached the server
	case errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams:
		// The server refused the call before running it.
		return guard.NewError(guard.CodeInvalidArguments, "The remote server refused the arguments.")
	}
	return guard.UnknownOutcome(err) // sent, answer lost: for a read the guard says UNAVAILABLE
}

// remoteOutput turns a remote CallToolResult into the tool's output or a
// typed error. A toolguard server's model result is read by its code.
func remoteOutput(res *sdk.CallToolResult) (json.RawMessage, error) {
	if mr, err := ModelResult(res); err == nil {
		return modelResultOutput(mr)
	}
	if res.IsError {
		return nil, fmt.Errorf("mcp: the remote tool failed: %s", contentText(res))
	}
	if res.StructuredContent != nil {
		return structured(res)
	}
	return json.Marshal(res.Content)
}

// structured returns a result's structuredContent as exact JSON. go-sdk's
// client decodes it into an any, whose numbers are float64: an integer
// above 2^53 comes back rounded. Servers send the same JSON as a text
// content beside it (the specification asks them to, and go-sdk's
// servers do): a text that decodes to the very value decoded is that
// JSON, exact, and is taken instead; with none, the decoded value is all
// there is.
func structured(res *sdk.CallToolResult) (json.RawMessage, error) {
	for _, c := range res.Content {
		tc, ok := c.(*sdk.TextContent)
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal([]byte(tc.Text), &v) == nil && reflect.DeepEqual(v, res.StructuredContent) {
			return json.RawMessage(tc.Text), nil
		}
	}
	return json.Marshal(res.StructuredContent)
}

// modelResultOutput maps a remote toolguard server's model result: its
// data when OK; the not-started codes a tool may claim as themselves; any
// other not-started result as UNAVAILABLE (nothing ran; retry later); an
// unknown outcome as unknown.
func modelResultOutput(mr *guard.Result) (json.RawMessage, error) {
	switch {
	case mr.Code == guard.CodeOK:
		return mr.Data, nil
	case mr.Code == guard.CodeNotFound:
		return nil, guard.ErrNotFound
	case mr.Code == guard.CodeTimeoutBeforeExecute:
		return nil, guard.NotStarted(errors.New("mcp: the remote server did not start the call"))
	case mr.Code == guard.CodeRateLimit:
		return nil, guard.RateLimited(mr.RetryAfter, errors.New("mcp: the remote server is rate limited"))
	case mr.Code == guard.CodeInvalidArguments || mr.Code == guard.CodeUnknownTool:
		return nil, guard.NewError(guard.CodeInvalidArguments, mr.Message)
	case mr.Outcome() == guard.OutcomeNotStarted:
		return nil, guard.NewError(guard.CodeUnavailable, "The remote server did not run the call: "+mr.Message)
	}
	return nil, guard.UnknownOutcome(fmt.Errorf("mcp: the remote outcome is %s", mr.Code))
}

func contentText(res *sdk.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			return tc.Text
		}
	}
	return "(no text)"
}

// errNoRemoteReceipt is the inconclusive answer of every remote tool: MCP
// has no receipt lookup.
var errNoRemoteReceipt = errors.New("mcp: a remote MCP tool has no receipt lookup")

// noReceipt is every remote tool's receipt lookup: inconclusive.
func noReceipt(context.Context, *guard.Invocation) (json.RawMessage, bool, error) {
	return nil, false, errNoRemoteReceipt
}
