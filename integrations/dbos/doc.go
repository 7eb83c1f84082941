// Package tgdbos runs a guarded agent run (package durable) as a DBOS
// workflow (github.com/dbos-inc/dbos-transact-golang), so that the run
// outlives the process that started it: a process that dies mid-run is
// replaced by one that launches DBOS on the same Postgres, and DBOS
// recovers the workflow from its last recorded step.
//
// It is a thin shim. durable.Drive is the workflow's body; this package
// gives it its steps:
//
//   - a model turn is the DBOS step StepTurn, running durable.Runner.Turn;
//   - a tool dispatch is the DBOS step StepDispatch (StepDecide with a
//     human's decision), running durable.Runner.Dispatch: the host step,
//     for the run's principal, in the run's scope, which is the workflow
//     id;
//   - a wait for a human is durable: the request is published as the
//     workflow's event EventPending (read it from any process with
//     Pending), an optional Options.Notify step tells the approvers, and
//     the workflow waits (DBOS Recv, topic TopicDecision) for the decision
//     that Approve or Decide sends from any process.
//
// A step that DBOS runs again after a crash (the process died after the
// step's work and before DBOS recorded it) makes the same guard call in
// the same scope: the write's operation id is derived from the workflow
// id and the call's intent (guard.ScopeIDs), so the guard replays the
// stored outcome instead of running the tool again. The model is given
// the stored result, and the run goes on.
//
// docs/dbos.md states the rules this package chose.
package tgdbos
