// Package tgtemporal runs a guarded agent run (package durable) as a
// Temporal workflow (go.temporal.io/sdk), so that the run outlives the
// process that started it: the model's turns and the tool calls are
// activities, a worker that dies mid-run is replaced by any other worker
// of the task queue, and a write that waits for a human is a durable wait
// on a signal, answered from any process.
//
// It is a thin shim. durable.Drive is the workflow's body (Workflow);
// this package gives it its steps:
//
//   - a model turn is the activity TurnName, running
//     durable.Runner.Turn;
//   - a tool dispatch is the activity DispatchName, running
//     durable.Runner.Dispatch: the host step, for the run's principal, in
//     the run's scope, which is the workflow id;
//   - a wait for a human is durable: the request is readable with the
//     query PendingName (Pending), and the workflow waits for the signal
//     DecisionName (a durable.Answer) that Approve or Decide sends from
//     any process.
//
// Temporal retries an activity whose attempt failed, timed out, or whose
// worker died. A dispatch attempt is the same guard call in the same
// scope, as the same step: the write's operation id is derived from the
// workflow id and the call's intent (guard.ScopeIDs), and its reservation
// belongs to the step (guard.Call.Step, the activity id). A retried
// dispatch replays a stored outcome, or settles the write an earlier
// attempt reserved (its worker died, or the server gave up on it) from
// the tool's receipt instead of waiting for it. An attempt that finds the
// write running in another step (the model asked twice) fails, retryably,
// so that a later attempt replays the outcome once it is stored. The
// approvers are told once per question (NotifyName, with the
// question's id as the key), a question has one timer, and an expiry is
// told as such (guard.Expired). Start refuses another principal's run id
// (ErrOtherRun).
//
// docs/temporal.md states the rules this package chose; package durable,
// the rules every engine keeps.
package tgtemporal
