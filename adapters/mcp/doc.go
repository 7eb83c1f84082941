// Package tgmcp carries guarded tool calls over the Model Context Protocol
// (github.com/modelcontextprotocol/go-sdk), both ways.
//
// # Serving a guarded toolset
//
// NewServer serves a toolset.Set through a guard. tools/list gives each
// tool with its input schema (InputSchema) and the tool-model-result-v2
// object schema (ResultSchema) as outputSchema, plus a status tool
// (toolset.StatusTool). MCP has no strict mode, so the server reads
// arguments as contract section 8 says for providers without one: an
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
// # Call identity
//
// A client may send, in the tools/call request's _meta, the JSON strings
// MetaIdempotencyKey ("toolguard/idempotency_key"), MetaOperationID
// ("toolguard/operation_id") and MetaCallID ("toolguard/call_id"). A client
// that sends any of them owns the call's identity, and the server derives
// nothing: a write whose three ids are all empty is refused with an
// invalid-params error and does not run. A client that sends none gets a
// call id derived from the MCP session id (over stdio or in memory, a nonce
// of the connection) and the JSON-RPC request id.
//
// What that deduplicates: JSON-RPC request ids are unique within a session,
// so the same request delivered twice within its session (a transport or
// proxy that sends a POST again) is one call, replayed from the store. What
// it does not: request ids are reused across sessions, so a client that
// reconnects (a new session, a restarted stdio process) and sends its
// request again makes a new call; so does a request sent again under a new
// request id. Such a client must send MetaIdempotencyKey (or
// MetaOperationID) to be deduplicated across sessions. Messages sent as a
// JSON-RPC batch over HTTP are not stamped: they need ids in _meta.
//
// # Approval
//
// A grant from guard.Signer.Sign may come in _meta as MetaApproval. When a
// write answers APPROVAL_REQUIRED without one, the server has a Signer
// (Options.Signer) and the client declared elicitation, the server asks the
// client's human (the tool, its arguments, what it does); a yes mints a
// grant approved by the session's user and dispatches again with it, a no
// or a dismissal is APPROVAL_REQUIRED with DeclinedMessage. A client without
// elicitation gets APPROVAL_REQUIRED.
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
