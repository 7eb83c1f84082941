// Package tgmcp carries guarded tool calls over the Model Context Protocol
// (github.com/modelcontextprotocol/go-sdk), both ways.
//
// # Serving a guarded toolset
//
// NewServer serves a toolset.Set through a guard. tools/list gives each
// tool with its input schema (InputSchema) and the tool-model-result-v2
// object schema as outputSchema, plus a status tool
// (toolset.StatusTool). MCP has no strict mode, so the server reads
// arguments as contract section 3 says for providers without one: an
// absent member whose schema allows null is null (provider.FillNulls), and
// the listed inputSchema is the toolset schema with those members not
// required; it accepts exactly the arguments the guard then accepts.
// tools/call goes through guard.Dispatch and is answered with a
// CallToolResult whose structuredContent is the model result, whose content
// is its JSON text, and whose isError is set when the code is not OK. A call
// of a tool that does not exist is answered UNKNOWN_TOOL, like any other
// dispatch, not with a protocol error.
//
// The principal comes from the host, never from the request: over
// streamable HTTP (Server.Handler, Server.Mount) from the bearer token,
// verified by go-sdk's auth.RequireBearerToken with the host's
// TokenVerifier; over stdio or in memory (Server.Run, Server.Connect),
// Options.Principal, the process's configured user.
//
// # Authorization over HTTP
//
// Server.Mount makes the endpoint an OAuth 2.1 resource server as the MCP
// authorization specification (2025-06-18 and later) has it: its Protected
// Resource Metadata (RFC 9728, Resource) at
// /.well-known/oauth-protected-resource and the endpoint's path under it,
// naming the host's authorization servers; 401 with WWW-Authenticate:
// Bearer resource_metadata="…" for a request without a valid token.
// JWTVerifier accepts the JWT access tokens of one authorization server:
// signature against its JWK Set (fetched and cached), issuer, audience (the
// endpoint's canonical URI, RFC 8707), expiry; the host's
// JWTOptions.Principal maps the claims to the principal. A host may write
// its own TokenVerifier instead, e.g. a static token for development.
//
// Options.ToolScopes names the scopes each tool needs. A tools/call whose
// token lacks one is answered 403 with WWW-Authenticate: Bearer
// error="insufficient_scope", scope="…", resource_metadata="…", before the
// guard, as the specification's scope challenge has it, rather than with a
// NOT_FOUND-like tool result: a 403 is what a client reads to ask its
// authorization server for the scope (step-up) and send the call again,
// while a tool result would reach the model as a failure no one can fix.
// The cost: the call leaves no audit record (it never became a dispatch),
// and a client that cannot step up ends its session there (go-sdk's client
// v1.8.0 does). tools/list lists every tool whatever the token's scopes,
// so that a client can learn what to ask for.
//
// # Running as a fleet
//
// Server.Handler serves two generations of the protocol at one endpoint.
// A request of protocol 2026-07-28 or later (its Mcp-Protocol-Version
// header, or the io.modelcontextprotocol/protocolVersion of its _meta)
// goes to go-sdk's stateless handler: there is no session, and every
// request carries what the server needs (the principal in its token, the
// client's capabilities in its _meta). A request of an earlier version
// (2025-11-25 and before) goes to go-sdk's handler of sessions, which this
// process holds in memory.
//
// So several replicas of one server can serve one endpoint behind any load
// balancer, each on its own guard, when they share three things: the
// guard's store (one Redis, one prefix), Options.State (NewRedisStateStore
// on that Redis), and the key of Options.Signer (it signs the grants and
// seals the request states). Then a 2026-07-28 client may reach any replica
// with any request, the answer to an approval question and the polls of a
// task included, and a replica may be restarted at any time: nothing a
// request needs is in a replica's memory. Each replica's clock
// (Options.Clock) decides when a question expires and when a task's run
// is taken over: keep the replicas' clocks in step (NTP), as the guard's
// leases already want. A 2025-11-25 client needs
// session affinity: the balancer must send every request carrying an
// Mcp-Session-Id to the replica that created it (another answers 404, and
// the client must start again); a replica restarted loses its sessions.
//
// # Call identity
//
// A client may send, in the tools/call request's _meta, the JSON strings
// MetaIdempotencyKey ("toolguard/idempotency_key"), MetaOperationID
// ("toolguard/operation_id") and MetaCallID ("toolguard/call_id"), or the
// idempotencyKey parameter of request idempotency (SEP-3182, a JSON string
// beside name and arguments; it must equal MetaIdempotencyKey when both
// come). A client that sends any of them owns the call's identity, and the
// server derives nothing: a write whose ids are all empty is refused with
// an invalid-params error and does not run. A client that sends none gets
// a call id derived from the MCP session id (over stdio or in memory, a
// nonce of the connection; over 2026-07-28, which has no session, a nonce
// of the HTTP request) and the JSON-RPC request id, and that session is
// the call's scope: the same write repeated in it is one operation.
// The _meta member "toolguard/scope" names a wider scope, a conversation the
// client may send with each call.
//
// What makes two requests one operation, then: the same idempotency key
// (either way it came) or operation id; the same intent in the same scope
// ("toolguard/scope", or the session); a call answered with the request state of
// an approval question, which names the operation the question was asked
// for (see Approval). What does not: over 2026-07-28, two requests with
// none of these are two operations, whatever they carry, since JSON-RPC
// ids are reused by every client and there is no session to tell them
// apart; so a client that re-issues a write whose response it lost (as
// 2026-07-28 has it do, with a new request id) must send an idempotency
// key, a scope, or the request state it answered. Within a 2025-11-25
// session, the same request delivered twice is one call; a client that
// reconnects makes a new session. Messages sent as a JSON-RPC batch over
// HTTP are not stamped: they need ids in _meta.
//
// The server honours idempotencyKey as SEP-3182 has it, and advertises
// capabilities.tools.idempotency in its initialize and server/discover
// results: a key already used with the same tool and arguments replays
// what the guard recorded under it (delivery local_replay), on any
// replica, for the guard store's retention; a key used for another tool or
// other arguments is the JSON-RPC error -32602 (invalid params) with data
// {"type":"idempotency_key_conflict","idempotencyKey":…}; a key whose call
// is running is -32600 (invalid request) with data type
// "idempotency_key_in_progress", at once (send the call again later). A
// key is the principal's: another tenant's or subject's same key is
// another key. The _meta members keep the tool-result answers of the
// contract (IDEMPOTENCY_CONFLICT, IN_PROGRESS as model results).
//
// # Approval
//
// A grant from guard.Signer.Sign may come in _meta as MetaApproval. When a
// write answers APPROVAL_REQUIRED without one, the server has a Signer
// (Options.Signer) and the client declared elicitation, the server asks the
// client's human (the tool, its arguments, what it does) with an input
// request, toolguard_approval, and a request state: go-sdk carries them as
// a multi round-trip request on 2026-07-28 and later (the client sends the
// call again with the answer and the state, possibly to another replica)
// and as an elicitation/create request within the session before.
//
// The request state is the question sealed (AES-256-GCM, under a key
// derived from the Signer's): the principal it was asked of, the tool, the
// fingerprint of its arguments, the operation the call runs as, and when
// it expires (Options.QuestionTTL, default 10 minutes). The client can
// neither read nor change it, and nothing is stored when it is asked. The
// answer is stored once, in Options.State, under the question: a yes
// mints a grant approved by the principal, named after the question, and
// dispatches with it; a no is APPROVAL_REQUIRED with guard.DeclinedMessage; an
// answer after the expiry runs nothing and is guard.Expired
// (APPROVAL_REQUIRED with guard.ExpiredMessage: nobody declined). The same
// answer sent again with the same state (the response was lost, a POST was
// delivered twice) goes on as the first did, so the guard replays the one
// execution; answers are kept for a day after their question expired. A
// state refused is a JSON-RPC invalid-params error whose data.type says
// why, never a new question: request_state_invalid (not sealed by this
// fleet, changed, or another principal's), request_state_other_call
// (another tool or other arguments), request_state_other_operation
// (another idempotency key, operation id or scope), request_state_answered
// (answered already, otherwise), request_state_no_answer. A client without
// elicitation gets APPROVAL_REQUIRED.
//
// # Tasks
//
// The server implements the Tasks extension of 2026-07-28
// (io.modelcontextprotocol/tasks, SEP-2663) and advertises
// it. A write that waits on its human, from a client that declared the
// extension (and elicitation) on the request, is answered with a task
// (resultType task, status input_required) instead of a multi round-trip
// question; the same operation while its task waits gets the same task.
// The task lives in Options.State, so tasks/get, tasks/update and
// tasks/cancel work on any replica and after restarts: tasks/get shows the
// question as inputRequests.toolguard_approval; the first tasks/update
// that answers it wins (a yes runs the write before the acknowledgement, a
// no completes the task declined) and later answers are ignored; a task
// not answered within QuestionTTL completes with guard.Expired; a task
// cancelled before its answer runs nothing; a completed task's result is
// the call's CallToolResult. A poll that finds a task still working 30
// seconds after its run began (its replica died) runs it again, and the
// guard replays or answers IN_PROGRESS. Tasks are kept an hour past their
// question's expiry. A task is its principal's only: another gets -32602,
// task not found; a token without the scopes of the task's tool
// (Options.ToolScopes) is refused as tools/call of it would be; a client
// that did not declare the extension gets -32021.
//
// # Guarding another server's tools
//
// Import turns the tools of any MCP client session into guard tools
// (RemoteTools), so that calls pass the guard before they reach the remote
// server. Each RemoteTool is a toolset.Declared whose schema is the
// server's inputSchema (toolset.CompileSchema, not strict), so
// RemoteTools.Set (or toolset.New) makes them a toolset.Set that
// agentloop.New takes like any other: the provider adapters offer them
// with that schema as is, without strict mode. A remote result's
// structuredContent is the tool's output, exact: go-sdk's client decodes
// it with float64 numbers, so the JSON of a text content that carries the
// same value (which servers send beside it) is read instead, and an
// integer above 2^53 reaches the model as the server wrote it.
package tgmcp
