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
//   - a model turn is the activity ActivityTurn, running
//     durable.Runner.Turn;
//   - a tool dispatch is the activity ActivityDispatch, running
//     durable.Runner.Dispatch: the host step, for the run's principal, in
//     the run's scope, which is the workflow id;
//   - a wait for a human is durable: the request is readable with the
//     query QueryPending (Pending), and the workflow waits for the signal
//     SignalDecision (a DecisionSignal) that Approve or Decide sends from
//     any process.
//
// Temporal retries an activity whose attempt failed, timed out, or whose
// worker died. A dispatch attempt is the same guard call in the same
// scope: the write's operation id is derived from the workflow id and the
// call's intent (guard.ScopeIDs), so a retried dispatch replays the
// stored outcome instead of running the tool again, and the model is
// given the stored result. An attempt that finds the operation still
// running (an earlier attempt the server gave up on, whose worker still
// runs the tool) fails, retryably, so that a later attempt replays the
// outcome once it is stored.
//
// docs/temporal.md states the rules this package chose.
package tgtemporal
