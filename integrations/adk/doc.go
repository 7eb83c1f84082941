// Package tgadk runs toolguard inside Google's Agent Development Kit for Go
// (google.golang.org/adk/v2): every tool call an ADK agent makes goes
// through a guard.Guard, and the model gets the tool-model-result-v2
// object back as the function response.
//
//	a, _ := tgadk.New(g, tools, tgadk.Options{Options: host.Options{Principal: session, Signer: signer}})
//	ag, _ := llmagent.New(llmagent.Config{Name: "refunds", Model: m, Tools: a.Tools()})
//	p, _ := a.Plugin()
//	r, _ := runner.New(runner.Config{AppName: "shop", Agent: ag, SessionService: svc,
//		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}}})
//
// New turns the tools of a toolset.Set (the guard's tools) into ADK tools:
// each is declared to the model with its toolset schema
// (FunctionDeclaration.ParametersJsonSchema, the very schema the arguments
// are validated against), and its Run dispatches a guard.Call. The status
// tool (toolset.StatusTool, answered by guard.Guard.QueryStatus) is offered
// beside them. ADK's own tools join them: a functiontool (or any tool with
// a declaration and a Run) through Import, into the set; an ADK toolset
// whose tools are known only within a run (an mcptoolset) through
// ImportToolset, given to the guard with Join and to the agent with
// Guarded.Toolsets. Their declared JSON schema is compiled with
// toolset.CompileSchema and validates the arguments before the tool runs,
// as adapters/mcp does for a remote MCP server's tools, and the model is
// offered their own declaration.
//
// # The call
//
// The function call becomes a guard.Call: its name, its arguments (the
// FunctionCall's Args as JSON) and ADK's function call id
// (agent.Context.FunctionCallID, through guard.SafeID). The principal comes
// from Options.Principal, a function of the ADK context the host writes
// (its session, its token), never from the model. Options embeds
// host.Options, the options every integration takes; its host functions
// (Principal, Scope, Call) get the tool call's agent.Context as their
// context.Context, which the host asserts (ctx.(agent.Context)) for
// ADK's user, session or invocation id. The scope
// (guard.ExecutionContext.Scope) is the ADK session by default
// (app, user and session id; Options.Scope names another, such as
// the invocation): Gemini may send no call id (ADK then makes up one) or
// another one when a call is retried, so a write is identified by its
// scope and the fingerprint of its intent (guard.ScopeIDs): the same
// write asked again in the session, by a retried or resumed run, replays
// its first outcome instead of running again. Options.Call lets the host
// set further fields of each call (an operation id, an idempotency key, a
// grant it obtained itself). The answer is the function response map: the
// tool-model-result-v2 object itself (ModelResult reads it back).
//
// A call of a tool the agent does not have never reaches a tool in ADK: it
// reaches the OnToolError callbacks. Plugin (or OnToolError, for
// llmagent.Config.OnToolErrorCallbacks) dispatches it to the guard, which
// answers UNKNOWN_TOOL, audited like every call, so the model gets a
// model result and not ADK's error text. A tool the guard has but the
// agent was not given is UNKNOWN_TOOL too, and never runs. With
// Options.AllowUnguarded, Plugin also fails closed on ADK tools the host
// did not import: they run only if allowed (ADK's control tools), and are
// otherwise UNKNOWN_TOOL.
//
// # Approvals
//
// A write that needs approval and comes without one is APPROVAL_REQUIRED
// from the guard. With Options.Signer set, the tool then asks ADK's own
// confirmation (agent.Context.RequestConfirmation): the run pauses with an
// adk_request_confirmation function call whose ToolConfirmation carries a
// hint (the tool, its canonical arguments, what it does) and a Payload
// (ConfirmationPayload: tool, arguments, fingerprint, operation id). The
// host's client answers it with ADK's confirmation response (a
// FunctionResponse to that call, {"confirmed": true|false}); ADK then runs
// the original call again with the decision (agent.Context.ToolConfirmation).
// The answer becomes the host's decision (Options.Decide, an
// host.Decision: by default the answer as given, approved by the ADK
// user who answered). A yes becomes a grant (guard.NewGrant, bound to the
// exact principal and proposal, naming the approver, signed by
// Options.Signer) presented with the call, which runs once. A no is
// answered with APPROVAL_REQUIRED and a message that says a human declined
// (with the decision's reason): the call goes to the guard without a
// grant, so nothing runs (and an operation a yes already ran replays
// instead of being called declined); the model is told once, and the same intent asked again in the session gets the same
// answer without a human being asked (the denial is kept in the session
// state, contract section 4), unless the decision was Expired. Without a
// Signer, the APPROVAL_REQUIRED result goes to the model as it is.
//
// With Options.Approver set, the call does not pause: the approver is
// asked and the call waits for its decision, as in agentloop.
//
// The approvals inbox (package approvals) can hold these requests when the
// call waits: with Options.Approver = &approvals.Waiter{Queue: q}, each
// write that needs approval is put in the tenant's inbox (Queue.Ask, the
// request's RunID the call's scope, its operation id the one the grant
// pays for), waits there for a person (the inbox's rules: the approver
// role, nobody approves their own request), and the decision becomes the
// grant or the denial. It cannot hold an ADK confirmation pause: Queue.Park
// and Worker keep and resume agentloop runs (agentloop.State,
// Loop.Resume), while a paused ADK run lives in ADK's session service and
// continues only by a new runner.Run carrying the confirmation response,
// which nothing in package approvals sends. A host that wants both can
// put the request in the inbox itself (Queue.Ask), read its decision
// (Queue.Get), and answer the confirmation through runner.Run.
//
// Nothing here panics into the host: the guard recovers panics of tools,
// and an ADK tool's panic is caught by functiontool, or by Import's Execute.
package tgadk
