// Package tggenkit runs Firebase Genkit for Go's tool calls through
// toolguard: each tool request of a generation is typed, validated,
// authorized per tenant, approved where it must be, executed at most once,
// audited, and answered with the tool-model-result-v2 object as the tool's
// output.
//
//	set := toolset.MustNew(getOrder, refund)           // toolset tools; Genkit's own: Import(genkitTool, …)
//	g := guard.New(set, store, guard.Options{Signer: signer})
//	gd, _ := tggenkit.New(g, set, host.Options{Signer: signer})
//	ctx = host.WithScope(host.WithPrincipal(ctx, principal), sessionID)
//	resp, _ := genkit.Generate(ctx, gk, ai.WithModel(m), ai.WithUse(gd), ai.WithPrompt(text))
//
// # One call
//
// Guarded is an ai.Middleware (give it to ai.WithUse, on every generation
// and every resume). Its WrapTool hook wraps every tool execution of the
// generation's tool loop and turns the ai.ToolRequest into a guard.Call:
// the tool's name, its input as JSON, and the request's ref as the call
// id. The principal comes from the host's function of the context
// (Options.Principal; by default the one host.WithPrincipal put there), never
// from the model. The scope comes from the host's function too
// (Options.Scope; by default host.WithScope's): name the session, conversation
// or flow run there. A model may send no ref (Genkit then makes up one)
// and a retried generation gets new ones; the guard gives a write in the
// scope the ids guard.ScopeIDs(scope, fingerprint), so the same intent in
// the same scope is one operation, and a retry, a re-run or a resume
// replays it instead of acting twice. Options.Call sets what Genkit does
// not carry (an operation id, an idempotency key, a grant). The guard's
// answer is the tool response's Output, the tool-model-result-v2 object as
// a map (Output; ModelResult reads it back), for every outcome. An error
// goes back to Genkit, and fails the generation, only for the host's own
// failures (no principal, a host function that panicked, a resume for
// another call, a programming error the guard reports); no panic leaves
// the package.
//
// # Tools
//
// The middleware's hooks offer the model the tools of the toolset.Set the
// guard runs (ai.Hooks.Tools: do not also pass them to ai.WithTools), each
// declared with the schema its arguments are validated against, and the
// status tool (toolset.StatusTool), answered by guard.Guard.QueryStatus
// for the generation's principal. Tools declared with package toolset run
// their own function once the guard let the call through. Genkit's own
// tools (genkit.DefineTool, ai.NewTool, any ai.Tool) join the set through
// Import and are given to the generation as usual (ai.WithTools,
// Tool.Genkit): their input schema is compiled with toolset.CompileSchema
// and validates the arguments, and once the guard let a call through the
// tool runs through Genkit's own tool runner; host.InvocationFrom gives its
// function the downstream idempotency key (an imported tool the
// generation was not given still runs, directly). Every tool call of the
// generation goes through the guard: a Genkit tool the guard was not
// given is UNKNOWN_TOOL and never runs. A tool the generation does not
// have at all would fail Genkit's tool loop; the middleware's WrapModel
// hook registers a stand-in for it in the generation's own registry, so
// the call reaches WrapTool and the model gets UNKNOWN_TOOL, audited,
// instead of the generation failing. (The generation's registry is found
// through the tools the middleware offers: with Options.NoStatusTool and
// no toolset tools in the set, Genkit's own behaviour stays, and such a
// call fails the generation.)
//
// # Approvals
//
// A write whose tool needs approval, asked without a grant, is
// APPROVAL_REQUIRED from the guard; with Options.Signer set, WrapTool then
// interrupts the generation (ai.NewToolInterruptError): Genkit ends it
// with FinishReason "interrupted", and the interrupted tool request's
// metadata holds an host.ApprovalRequest (the exact tool, canonical
// arguments, principal, fingerprint and operation id). Approvals reads the
// requests from resp.Interrupts(). The host resumes with each human's
// host.Decision: Resume turns the interrupted part into a restart
// carrying it, given to ai.WithToolRestarts on a generation from the
// interrupted history (ai.WithMessages(resp.History()...)), with the same
// middleware, principal and scope. Genkit runs the tool request again
// through WrapTool, which reads the decision (ai.ResumedValue) and checks
// it is for this principal and these arguments (else host.ErrOtherCall, and
// nothing runs). A yes becomes a grant (guard.NewGrant, bound to exactly
// that principal and proposal, approved by the decision's approver,
// signed by Options.Signer) presented on the re-run, which then runs,
// once. A no is the result the model gets, once, APPROVAL_REQUIRED saying
// a human declined, and nothing runs; within the scope the same intent is
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
// scope), reads the decision back (Queue.Get) and resumes the generation
// with it. What the inbox cannot do is resume the generation itself:
// Queue.Park keeps an agentloop run's State and approvals.Worker resumes
// it with agentloop.Loop.Resume, while a Genkit generation's state is its
// message history, which the host keeps, and only the host's
// genkit.Generate can resume it.
//
// # Contract notes
//
// Genkit hands a tool the model's input without saying whether the model
// was held to the strict schema, so for a toolset tool an absent member
// whose schema allows null reads as null (contract section 3). A request
// without an input has the arguments {}. Genkit's tool loop copies the
// model's reply through encoding/json before running its tools, so
// numbers reach the guard as float64: digits beyond float64's precision
// are lost before the guard sees them. A Genkit tool's output is its
// Output as JSON; its error is, for a write, an unknown outcome
// (OUTCOME_UNKNOWN) unless it is a guard error that says otherwise; an
// interrupt it raises itself means it did not do its work (Genkit re-runs
// an interrupted tool from the start), so the call did not start:
// declare imported tools without interrupts of their own, the guard asks
// for approval. A tool request restarted without Resume's decision (say
// with ai.ToolAction.RestartWith) still needs approval, and Genkit refuses
// an interrupt raised while it runs a resume's restarts: that resumed
// generation fails, and nothing runs.
package tggenkit
