// Package durable runs a guarded agent run inside a durable execution
// engine (a DBOS workflow, a Temporal workflow), so that the run outlives
// the process that started it. It imports no engine: integrations/dbos
// and integrations/temporal are the thin shims that give it the engine's
// steps.
//
// A run is two halves:
//
//   - Drive is the workflow's body: deterministic, it holds the
//     conversation and decides what comes next, and does everything else
//     through Steps, which the engine records: a model turn (Steps.Turn),
//     a tool dispatch (Steps.Dispatch), a durable wait for a human's
//     decision (Steps.Approve). An engine that replays the workflow after
//     a crash gets the recorded answers back, and Drive takes the same
//     path again.
//   - Runner is what the steps run, in a worker: the provider's turn, and
//     the host step (package host) for a tool call, whose principal comes
//     from the run's input, never from the model, and whose scope is the
//     run id (the workflow id).
//
// Engines retry a step whose result was not recorded (a DBOS step the
// process died in, a Temporal activity that timed out or failed after its
// side effect). A retried dispatch is the same call in the same scope: the
// guard replays the stored outcome instead of running the tool again, and
// a grant minted again for an approved write finds the operation done.
// The model is given the stored result, and the run goes on.
package durable
