// Package tgeino runs CloudWeGo Eino's tool calls through toolguard: each
// call a compose ToolsNode (or an adk ChatModelAgent) makes is typed,
// validated, authorized per tenant, approved where it must be, executed at
// most once, audited, and answered with the tool-model-result-v2 JSON as
// the tool's output.
//
//	set := toolset.MustNew(getOrder, refund)              // toolset tools, or Import(ctx, einoTool, …)
//	g := guard.New(set, store, guard.Options{Signer: signer})
//	eg, _ := tgeino.New(g, set, host.Options{Signer: signer})
//	cfg := eg.ToolsNodeConfig()                           // Tools, the middleware, UnknownToolsHandler
//	agent, _ := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Model: m, ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: cfg}, …})
//	ctx = host.WithScope(host.WithPrincipal(ctx, principal), runID)
//
// # One call
//
// The middleware (Guarded.ToolMiddleware, in ToolsNodeConfig.ToolCallMiddlewares;
// or Guarded.AgentMiddleware, an adk.ChatModelAgentMiddleware whose
// WrapInvokableToolCall does the same) turns Eino's compose.ToolInput into a
// guard.Call: the tool's name, its arguments as the model wrote them, and
// Eino's call id. The principal comes from the host's function of the
// context (Options.Principal; by default the one host.WithPrincipal put there),
// never from the model. The scope comes from the host's function too
// (Options.Scope; by default host.WithScope's): name the run, session or
// checkpoint id there; with an adk Runner, SessionScope reads it from a
// session value, which Eino keeps in its checkpoints across a resume.
// Call ids change when the model or Eino retries; the guard then gives a
// write in the scope the ids guard.ScopeIDs(scope, fingerprint), so the
// same intent in the same run is one operation, and a retry, a re-run or
// a resume replays it instead of acting twice.
// Options.Call sets what Eino does not carry (an operation id, an
// idempotency key, a grant). The guard's answer goes back as the tool's
// output string, guard.Result.String(), for every outcome: an error goes
// back to Eino only for the host's own failures (no principal, a
// programming error the guard reports), and no panic leaves the package.
// ModelResult reads a tool message's content back as the model result.
// A ToolsNode runs a reply's calls in parallel unless ExecuteSequentially:
// two identical writes of one reply are still one operation, the second
// IN_PROGRESS while the first runs, or its replay.
//
// # Tools
//
// Guarded.Tools offers the model the tools of the toolset.Set the guard runs,
// each with the schema its arguments are validated against, and the status
// tool (toolset.StatusTool), answered by guard.Guard.QueryStatus for the
// run's principal. Tools declared with package toolset run their own
// function once the guard let the call through. Eino's own tools
// (tool.InvokableTool or tool.StreamableTool) join the set through Import:
// a write needing approval unless the host says otherwise, authorized by
// the host's host.ImportOptions.Authorize, their Info's JSON Schema compiled
// with toolset.CompileSchema to validate the arguments; once the guard let
// a call through the tool
// runs through Eino's own endpoint (callbacks and inner middlewares) with
// the canonical arguments; host.InvocationFrom gives it the downstream
// idempotency key. A tool the guard does not know is UNKNOWN_TOOL, and
// Guarded.UnknownToolsHandler gives the model that result for a tool the
// ToolsNode does not have, instead of failing the run.
//
// # Approvals
//
// A write whose tool needs approval, asked without a grant, is
// APPROVAL_REQUIRED from the guard; with Options.Signer set, the middleware
// then interrupts the run with compose.StatefulInterrupt, its info an
// host.ApprovalRequest (the exact tool, arguments with their members
// sorted, principal, fingerprint and operation id), its state who was
// asked about which intent. Eino saves the run in its CheckPointStore (a compose graph
// compiled WithCheckPointStore, an adk Runner's CheckPointStore). Approvals
// and ApprovalsOf read the requests from the interrupt; the host resumes
// with each human's host.Decision as the resume data (Resume, or adk's
// ResumeParams.Targets, by interrupt id). A yes becomes a grant
// (guard.NewGrant, bound to exactly that principal and proposal, signed by
// Options.Signer) presented on the re-run of that call, which then runs,
// once. A no is the result the model gets, once, APPROVAL_REQUIRED saying a
// human declined, and nothing runs; within the scope the same intent is
// not put to a human again while this process remembers it. A host that
// prefers the call to wait sets Options.Approver (an host.Approver)
// instead: it is asked in place of the interrupt, and its answer is used
// the same way. Without a Signer (or with Options.NoInterrupt and no
// Approver) nobody is asked and the model gets APPROVAL_REQUIRED as a
// result.
//
// Can the approvals inbox (package approvals) hold these requests? Yes:
// each is an host.ApprovalRequest, the type approvals.Queue.Ask
// stores and the inbox shows and decides like any other. With
// Options.Approver an approvals.Waiter, a call waits in the inbox until an
// approver decides (the denial is then also remembered in Redis, by
// operation id). With interrupts, the host asks (Queue.Ask, RunID the
// scope), reads the decision back (Queue.Get) and resumes the Eino run
// with it. What the inbox cannot do is resume the run itself: Queue.Park
// keeps an agentloop run's State and approvals.Worker resumes it with
// agentloop.Loop.Resume, while an Eino run's state lives in Eino's
// CheckPointStore and only the host's Runner or graph can resume it.
//
// # Contract notes
//
// Eino hands a tool the model's arguments without saying whether the model
// was held to the strict schema, so for a toolset tool an absent member
// whose schema allows null reads as null (contract section 3). A wrapped
// Eino tool's text is its output: as is when it is JSON (as Eino's
// utils.InferTool writes every output), as a JSON string otherwise; its error is, for a write, an unknown
// outcome (OUTCOME_UNKNOWN) unless it is a guard error that says otherwise.
// Interrupts raised inside a wrapped tool are not supported. A ToolsNode's
// name aliases (ToolsNodeConfig.ToolAliases) are not resolved: the guard
// sees the name the model wrote, so a call by an alias is UNKNOWN_TOOL;
// argument aliases and ToolArgumentsHandler apply before the guard sees the
// arguments. Eino's tool callbacks fire once per call: for a wrapped Eino
// tool around its run through Eino's endpoint (with the tool's own
// output), for a toolset tool or the status tool around the guard's
// answer (with the model result).
package tgeino
