package tgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	Provider  = "mcp"
	APIFamily = "tools/call"
	Revision  = "mcp-tools-call-v1"
)

// The members of a tools/call request's _meta that this adapter reads. Each
// is a JSON string; any other type is an invalid-params error.
const (
	// MetaIdempotencyKey is the idempotency key of the call.
	MetaIdempotencyKey = "toolguard/idempotency_key"
	// MetaOperationID is the host's operation id (what a status query
	// names).
	MetaOperationID = "toolguard/operation_id"
	// MetaCallID is a call id chosen by the client, e.g. the model
	// provider's id of the tool call an agent host relays.
	MetaCallID = "toolguard/call_id"
	// MetaResponseID is the id of the model response that carried the
	// call, for the audit record.
	MetaResponseID = "toolguard/response_id"
	// MetaApproval is a signed approval grant token (guard.Signer.Sign).
	MetaApproval = "toolguard/approval"
	// metaScope names the scope in which a repeated write is the same
	// operation (guard.ExecutionContext.Scope), for a client that spans
	// several sessions with one conversation. Without it, a call whose
	// client sent no identity member is in its MCP session's scope.
	metaScope = "toolguard/scope"
)

// metaRequest is stamped into every tools/call request by the transports
// this package wraps (Connect, Handler): the connection's nonce and the
// JSON-RPC request id. A client's own value is always overwritten.
const metaRequest = "toolguard/request"

// Options configure a Server.
type Options struct {
	// Name and Version name the server to its clients; defaults
	// "toolguard" and "v1".
	Name, Version string
	// Principal is who the calls of connections made with Connect or Run
	// act for (stdio, in memory): the process's configured user. Calls
	// over HTTP (Handler) act for the bearer token's principal instead,
	// never for this one.
	Principal *guard.Principal
	// Signer mints approval grants from a human's answer to an
	// elicitation. Without one, the server never elicits: writes that need
	// approval answer APPROVAL_REQUIRED unless the client sends a grant
	// in _meta (MetaApproval).
	Signer *guard.Signer
	// GrantTTL is how long a grant minted from an elicitation is valid;
	// default 5 minutes (the dispatch that uses it follows at once).
	GrantTTL time.Duration
	// Clock dates the grants; it should be the guard's. Default
	// guard.SystemClock.
	Clock guard.Clock
	// StatusTool names the status tool; default toolset.StatusToolName.
	StatusTool string
	// State keeps the answers to approval questions and the tasks, shared
	// by the replicas of a fleet (NewRedisStateStore); default this
	// process's memory, for a server that runs as one process.
	State StateStore
	// QuestionTTL is how long a question put to a human takes its answer:
	// the request state of a multi round-trip request, the input of a
	// task. An answer after it gets guard.Expired (APPROVAL_REQUIRED,
	// guard.ExpiredMessage) and runs nothing. Default 10 minutes.
	QuestionTTL time.Duration
	// ToolScopes are the OAuth scopes a bearer token must grant to call
	// each tool over HTTP (Handler, Mount), by tool name (the status
	// tool's too). A call whose token lacks one is answered 403 with
	// WWW-Authenticate error="insufficient_scope" and the scopes it needs,
	// and never reaches the guard; a tool not named needs none beyond the
	// token. tools/list lists every tool whatever the token, so that a
	// client learns what to ask for. Connections without a token (Connect,
	// Run) act for Options.Principal and are not scoped.
	ToolScopes map[string][]string
}

// Server serves a guarded toolset over MCP: tools/list gives every tool
// of the set with its input schema (the very schema the guard validates
// arguments against) and the tool-model-result-v2 object schema as its
// output schema, plus a status tool; tools/call goes through the guard.
type Server struct {
	g       *guard.Guard
	opts    Options
	srv     *sdk.Server
	tools   map[string]toolset.Declared
	status  string
	statusT toolset.Declared // the status tool's declaration
	sealer  *sealer          // seals request states; nil without a Signer
	state   StateStore       // answers and tasks, shared by a fleet
}

// NewServer returns a server of the tools of set, dispatched through g. The
// set should be the guard's own tools.
func NewServer(g *guard.Guard, set *toolset.Set, opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "toolguard"
	}
	if opts.Version == "" {
		opts.Version = "v1"
	}
	if opts.GrantTTL <= 0 {
		opts.GrantTTL = 5 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = guard.SystemClock
	}
	if opts.StatusTool == "" {
		opts.StatusTool = toolset.StatusToolName
	}
	if opts.QuestionTTL <= 0 {
		opts.QuestionTTL = 10 * time.Minute
	}
	if opts.State == nil {
		opts.State = &memStateStore{}
	}
	s := &Server{g: g, opts: opts, tools: map[string]toolset.Declared{}, status: opts.StatusTool, state: opts.State}
	if opts.Signer != nil {
		var err error
		if s.sealer, err = newSealer(opts.Signer); err != nil {
			return nil, fmt.Errorf("mcp: the request state key: %w", err)
		}
	}
	caps := &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}}
	caps.AddExtension(tasksExtension, nil)
	s.srv = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &sdk.ServerOptions{Capabilities: caps})
	if err := s.addTasks(); err != nil {
		return nil, err
	}
	for _, t := range set.Tools() {
		if t.Name() == s.status {
			return nil, fmt.Errorf("mcp: tool %q has the status tool's name", t.Name())
		}
		s.tools[t.Name()] = t
		s.srv.AddTool(toolDef(t), s.callTool)
	}
	s.statusT = toolset.StatusTool(s.status)
	s.srv.AddTool(toolDef(s.statusT), s.callTool) // a read: readOnlyHint
	for name, scopes := range opts.ToolScopes {
		if name != s.status && s.tools[name] == nil {
			return nil, fmt.Errorf("mcp: ToolScopes names %q, which is not a tool of the set", name)
		}
		for _, sc := range scopes {
			if !validScope(sc) {
				return nil, fmt.Errorf("mcp: tool %q: scope %q is not an OAuth scope token", name, sc)
			}
		}
	}
	s.srv.AddReceivingMiddleware(s.receive)
	return s, nil
}

// receive is the server's receiving middleware. A call of a tool that
// does not exist is still a dispatch: the guard answers it UNKNOWN_TOOL
// (audited), instead of the SDK's protocol error, so the model can correct
// itself. A tools/call may be answered with the task it created (Tasks
// extension). The results of initialize and server/discover advertise
// tools.idempotency (SEP-3182), which go-sdk's types cannot hold. A
// tasks/* request gets its principal and scopes from its token, as
// tools/call does.
func (s *Server) receive(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch {
		case method == "tools/call":
			ct, ok := req.(*sdk.CallToolRequest)
			if !ok || ct.Params == nil {
				break
			}
			slot := &taskSlot{}
			ctx = context.WithValue(ctx, taskSlotKey{}, slot)
			var res sdk.Result
			var err error
			if ct.Params.Name != s.status && s.tools[ct.Params.Name] == nil {
				res, err = s.callTool(ctx, ct)
			} else {
				res, err = next(ctx, method, req)
			}
			if err == nil && slot.created != nil {
				return slot.created, nil
			}
			return res, err
		case method == "initialize" || method == "server/discover":
			res, err := next(ctx, method, req)
			return advertise(res), err
		case isTaskMethod(method):
			p, err := s.principal(req.GetExtra())
			if err != nil {
				return nil, err
			}
			ctx = context.WithValue(ctx, callerKey{}, caller{p: p, extra: req.GetExtra()})
		}
		return next(ctx, method, req)
	}
}

// toolDef is the MCP definition of one tool.
func toolDef(t toolset.Declared) *sdk.Tool {
	return &sdk.Tool{
		Name:         t.Name(),
		Description:  t.Description(),
		InputSchema:  InputSchema(t),
		OutputSchema: resultSchema(),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: t.Spec().Effect == guard.Read},
	}
}

// resultSchema returns the JSON Schema of the tool-model-result-v2 object,
// the output schema of every tool the server lists.
func resultSchema() json.RawMessage {
	var codes, statuses, outcomes, recoveries []string
	seen := map[string]bool{}
	add := func(list *[]string, v string) {
		if !seen[v] {
			seen[v] = true
			*list = append(*list, v)
		}
	}
	for c := guard.Code(1); c.Valid(); c++ {
		add(&codes, c.String())
		add(&statuses, string(c.Status()))
		add(&outcomes, string(c.Outcome()))
		add(&recoveries, string(c.Recovery()))
	}
	enum := func(v []string) map[string]any { return map[string]any{"type": "string", "enum": v} }
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"contract":       map[string]any{"type": "string", "const": guard.ResultContract},
			"code":           enum(codes),
			"status":         enum(statuses),
			"outcome":        enum(outcomes),
			"recovery":       enum(recoveries),
			"delivery":       enum([]string{string(guard.DeliveryFresh), string(guard.DeliveryLocalReplay), string(guard.DeliveryReceiptReconciled)}),
			"data":           map[string]any{},
			"message":        map[string]any{"type": "string"},
			"retry_after_ms": map[string]any{"type": "integer", "minimum": 0},
			"operation_id":   map[string]any{"type": "string"},
		},
		"required":             []string{"contract", "code", "status", "outcome", "recovery", "delivery", "data"},
		"additionalProperties": false,
	}
	b, _ := json.Marshal(schema)
	return b
}

// toolResult returns the CallToolResult of a model result: its
// structuredContent is the tool-model-result-v2 object, its content the
// object's JSON text, and isError is set when the code is not OK.
func toolResult(res *guard.Result) *sdk.CallToolResult {
	text := res.String()
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: json.RawMessage(text),
		IsError:           res.Code != guard.CodeOK,
	}
}

// ModelResult reads the model result back from a CallToolResult made by
// toolResult (its structuredContent, as an SDK client decodes it).
func ModelResult(r *sdk.CallToolResult) (*guard.Result, error) {
	if r == nil || r.StructuredContent == nil {
		return nil, errors.New("mcp: the result has no structuredContent")
	}
	b, err := structured(r)
	if err != nil {
		return nil, err
	}
	var res guard.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// invalidParams is the JSON-RPC error for a request the server cannot
// dispatch; the message is safe for the client.
func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// callTool answers one tools/call: the principal from the host, the ids
// from _meta or derived, the guard, then elicitation where approval is
// required and the client can ask its human; a call that comes back with
// its human's answer (a request state) is answered by answer.
func (s *Server) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p, err := s.principal(req.Extra)
	if err != nil {
		return nil, err
	}
	if missing := s.missingScopes(req.Params.Name, req.Extra); len(missing) > 0 {
		// Only where the HTTP layer could not answer 403 (a JSON-RPC
		// batch): refused all the same, before the guard.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "insufficient scope: the token lacks " + strings.Join(missing, " ")}
	}
	meta, err := readMeta(req.Params.Meta)
	if err != nil {
		return nil, err
	}
	ec := guard.ExecutionContext{
		Provider:        Provider,
		APIFamily:       APIFamily,
		ResponseID:      guard.SafeID(meta.responseID),
		CallID:          guard.SafeID(meta.callID),
		OperationID:     guard.SafeID(meta.operationID),
		IdempotencyKey:  guard.SafeID(meta.idempotencyKey),
		AdapterRevision: Revision,
	}
	if meta.requestKey != "" {
		// SEP-3182's idempotencyKey: the client owns the call's identity.
		if meta.idempotencyKey != "" && meta.idempotencyKey != meta.requestKey {
			return nil, invalidParams("idempotencyKey and _meta[" + strconv.Quote(MetaIdempotencyKey) + "] name different keys")
		}
		ec.IdempotencyKey = guard.SafeID(meta.requestKey)
		meta.identity = true
	}
	if !meta.identity {
		// A client that sends no ids (as the official SDKs do): the call
		// is its request in its session, and the session is the scope, so
		// a write repeated in the session is one operation. Without a
		// session (2026-07-28), the scope is the request.
		ec.CallID, ec.Scope = derivedIDs(req)
	}
	if meta.scope != "" {
		ec.Scope = guard.SafeID(meta.scope)
	}
	if req.Params.Name == s.status {
		return s.queryStatus(ctx, p, ec, req.Params.Arguments)
	}
	args := []byte(req.Params.Arguments)
	if len(args) == 0 {
		args = []byte("{}") // arguments are optional in MCP: none is an empty object
	}
	args = fillArgs(s.tools[req.Params.Name], args) // section 3: an absent nullable member is null
	call := guard.Call{Principal: p, Proposal: guard.Proposal{Name: req.Params.Name, Arguments: args},
		Context: ec, Approval: meta.approval}
	var res *guard.Result
	if call.Approval == "" && (req.Params.RequestState != "" || req.Params.InputResponses != nil) {
		// The call comes back with its human's answer.
		res, err = s.answer(ctx, req, &call, meta.callID != "" || meta.scope != "")
	} else {
		res, err = s.g.Dispatch(ctx, call)
		if err == nil && res.Code == guard.CodeApprovalRequired && call.Approval == "" && s.canElicit(req) {
			if !wantsTask(ctx, req) {
				return s.ask(call), nil
			}
			if res = s.createTask(ctx, call); res == nil {
				// The receiving middleware answers with the task.
				return &sdk.CallToolResult{}, nil
			}
		}
	}
	if err != nil {
		return nil, hostError(err)
	}
	if meta.requestKey != "" {
		if err := keyError(res, meta.requestKey); err != nil {
			return nil, err
		}
	}
	return toolResult(res), nil
}

// hostError turns the guard's host errors into JSON-RPC errors the client
// can act on.
func hostError(err error) error {
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		return werr
	case errors.Is(err, guard.ErrNoIdentity):
		return invalidParams("a write needs an identity: send " + MetaCallID + ", " + MetaIdempotencyKey + " or " + MetaOperationID + " in _meta, or call through a connection that numbers its requests")
	case errors.Is(err, guard.ErrBadID):
		return invalidParams("ids in _meta must be valid UTF-8 of at most 512 bytes")
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server could not dispatch the call"}
}

// errNoPrincipal is the answer to a call the host cannot attribute.
var errNoPrincipal = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server has no principal for this connection"}

// principal returns who the call acts for: the verified bearer token's
// principal over HTTP, the configured principal otherwise; never anything
// from the request.
func (s *Server) principal(extra *sdk.RequestExtra) (guard.Principal, error) {
	if extra != nil && extra.TokenInfo != nil {
		p, ok := extra.TokenInfo.Extra[principalKey].(guard.Principal)
		if !ok {
			return guard.Principal{}, errNoPrincipal
		}
		return p, nil
	}
	if extra != nil && extra.Header != nil {
		// HTTP without a verified token: never the process's principal.
		return guard.Principal{}, errNoPrincipal
	}
	if s.opts.Principal == nil {
		return guard.Principal{}, errNoPrincipal
	}
	return *s.opts.Principal, nil
}

// callMeta is what a request's _meta says about the call.
type callMeta struct {
	idempotencyKey, operationID, callID, responseID, approval, scope string
	// requestKey is the request's idempotencyKey parameter (SEP-3182),
	// as the transport stamped it.
	requestKey string
	// identity: the client sent one of the identity members (even empty),
	// so the server derives nothing.
	identity bool
	// request is the stamp of the transport: nonce and JSON-RPC id.
	request string
}

func readMeta(m sdk.Meta) (callMeta, error) {
	var c callMeta
	for _, f := range []struct {
		key      string
		dst      *string
		identity bool
	}{
		{MetaIdempotencyKey, &c.idempotencyKey, true},
		{MetaOperationID, &c.operationID, true},
		{MetaCallID, &c.callID, true},
		{MetaResponseID, &c.responseID, false},
		{MetaApproval, &c.approval, false},
		{metaScope, &c.scope, false},
		{metaRequest, &c.request, false},
		{metaRequestKey, &c.requestKey, false},
	} {
		v, ok := m[f.key]
		if !ok || v == nil {
			continue
		}
		str, isStr := v.(string)
		if f.key == metaRequestKey && (!isStr || str == "") {
			return c, invalidParams("idempotencyKey must be a non-empty string")
		}
		if !isStr {
			return c, invalidParams("_meta[" + strconv.Quote(f.key) + "] must be a string")
		}
		*f.dst = str
		if f.identity {
			c.identity = true
		}
	}
	return c, nil
}

// derivedIDs are the call id and scope of a request whose client sent no
// identity. The scope is the MCP session (or, where the transport has
// none, the connection's nonce): "mcp:" and its id. The call id is the
// scope and the JSON-RPC request id, which is unique within a session. A
// request sent twice within its session is the same call, and a write
// repeated in it the same operation; in another session (a reconnect) both
// are new.
func derivedIDs(req *sdk.CallToolRequest) (callID, scope string) {
	stamp, _ := req.Params.Meta[metaRequest].(string)
	if stamp == "" {
		return "", "" // not stamped: a connection this package did not wrap
	}
	nonce, id, _ := cut(stamp)
	sid := ""
	if req.Session != nil {
		sid = req.Session.ID()
	}
	if sid == "" {
		sid = nonce
	}
	scope = guard.SafeID("mcp:" + sid)
	return guard.SafeID("mcp:" + sid + ":" + id), scope
}

// queryStatus answers a call of the status tool through the guard's status
// query.
func (s *Server) queryStatus(ctx context.Context, p guard.Principal, ec guard.ExecutionContext, raw json.RawMessage) (*sdk.CallToolResult, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	in, bad := toolset.ParseStatus(fillArgs(s.statusT, raw))
	if bad != nil {
		return toolResult(bad), nil
	}
	res, err := s.g.QueryStatus(ctx, in.Call(p, ec))
	if err != nil {
		return nil, hostError(err)
	}
	return toolResult(res), nil
}
