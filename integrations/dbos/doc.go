// Package tgdbos runs a guarded agent run (package durable) as a DBOS
// workflow (github.com/dbos-inc/dbos-transact-golang), so that the run
// outlives the process that started it: a process that dies mid-run is
// replaced by one that launches DBOS on the same Postgres, and DBOS
// recovers the workflow from its last recorded step.
//
// It is a thin shim. durable.Drive is the workflow's body; this package
// gives it its steps:
//
//   - a model turn is the DBOS step TurnName, running durable.Runner.Turn;
//   - a tool dispatch is the DBOS step DispatchName (DecideName with a
//     human's decision), running durable.Runner.Dispatch: the host step,
//     for the run's principal, in the run's scope, which is the workflow
//     id;
//   - a wait for a human is durable: the request is published as the
//     workflow's event PendingName (read it from any process with
//     Pending), an optional Options.Notify step tells the approvers, and
//     the workflow waits (DBOS Recv, topic DecisionName) for the decision
//     that Approve or Decide sends from any process.
//
// A step that DBOS runs again after a crash makes the same guard call in
// the same scope, as the same step: the write's operation id is derived
// from the workflow id and the call's intent (guard.ScopeIDs), and its
// reservation belongs to the step (guard.Call.Step, the DBOS step id). A
// write whose outcome was stored is replayed; one the dead process
// reserved and may have run is settled from the tool's receipt, never
// answered IN_PROGRESS. The run ends as an uninterrupted one would: the
// approvers told once per question (Notify's key), one deadline per
// question, a decision found even when its wake-up is lost (the wait
// polls), an expiry told as such (guard.Expired). NewContext holds the
// process's DBOS executor identity, so that no second live process
// recovers its runs (ErrExecutorBusy).
//
// On one Postgres, the guard's store is pgstore on DBOS's own database,
// and with Options.DataSource the dispatch of a transactional tool
// (pgstore.WriteTx) is a DBOS transaction: the tool's rows, the guard's
// records and DBOS's record of the step commit together.
//
// docs/dbos.md states the rules this package chose; package durable, the
// rules every engine keeps.
package tgdbos
