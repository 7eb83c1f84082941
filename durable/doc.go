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
//
// # The rules every engine's module keeps
//
// A run that survives its process ends as if it had never stopped. These
// rules, the same for integrations/dbos and integrations/temporal, are
// what makes it so; docs/dbos.md and docs/temporal.md say how each engine
// keeps them.
//
// Steps own their writes. A dispatch names its step to the guard
// (guard.Call.Step: the run id and the engine's id of the step,
// DispatchInput.Step), so a write's reservation belongs to the step, not
// to the process that made it. The step the engine runs again after its
// process died between the reservation and the commit finds its own
// reservation and is never answered IN_PROGRESS for it; the guard settles
// it as a status query settles an unknown outcome: the tool's receipt
// under the same downstream key found, the write took place and the
// receipt is its result; absent, it did not, and it runs now, once;
// inconclusive (a tool without a receipt lookup), OUTCOME_UNKNOWN, never
// run blind. Give every write of a durable run a receipt lookup. A step
// run again after the write was stored replays it. Only another step (the
// model asking the same thing twice) waits for a write that runs.
//
// One notification per question. Approvers are told in a step of its
// own, which the engine records once the notifier returned; a failed
// notification is retried, then left (the question stays readable). Only
// a death between the send and that record repeats it, and the repeat
// carries the same idempotency key (QuestionID), so that a notifier that
// deduplicates by it tells the approvers once.
//
// One deadline per question. The wait for a human's decision ends at a
// deadline the engine records when the question is published
// (ApprovalTimeout after it): a decision that answers another question (a
// stale or repeated click) is dropped without moving it, and a recovered
// run waits only what is left. Where the engine's wake-up can be lost
// (DBOS's), the wait also polls for the decision at a bounded interval
// inside the deadline.
//
// An expiry is not a no. A question nobody decided by its deadline is
// answered guard.Expired (the model may ask again later), on every entry
// point, and is not remembered as a denial.
//
// One principal per run id. Starting a run id that names another
// principal's run is refused (each module's ErrOtherRun), and that run's
// status and result are never returned; the same principal gets the run
// that exists.
//
// One live process per run. A process never takes over the runs a live
// process runs (DBOS: its executor identity is held while it lives;
// Temporal: its server hands each task to one worker).
package durable
