// Package host is what every entry point that does not own the agent loop
// does around one tool call: the framework integrations (ADK-go, Eino,
// Genkit) and the durable engines (DBOS, Temporal) each keep only the
// code that speaks their framework's types, and call this package for the
// rest.
//
// One call goes through a Host in this order:
//
//   - Call names the call: its principal and scope from the host's
//     functions of the context (never from the model), its arguments with
//     absent nullable members of a strict schema read as null, the
//     framework's names in the execution context.
//   - Answer is the step: a status query for the status tool, else a
//     dispatch through the guard; a write that waits for a human is put
//     to the Approver inline, or handed back (Answer.Ask) for the
//     framework to pause its run on; an intent a human declined in the
//     scope gets the same no without asking again.
//   - Decide, when the framework's run resumes with the human's
//     decision, checks that the decision is about this very call
//     (Pending), turns a yes into a signed grant that pays for one
//     execution and dispatches with it, and answers a no once.
//   - Map turns the model result into the JSON object a framework hands
//     the model.
//
// Import puts a framework's own tool behind the guard (its JSON schema
// compiled, authorized by the host, a write that needs approval unless
// told otherwise), and WithPrincipal and WithScope carry who and where on
// a context for the frameworks whose tool calls see only a
// context.Context. See docs/integrations.md for the recipe a new
// framework module follows.
package host
