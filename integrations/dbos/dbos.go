package tgdbos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/host"
)

// The names DBOS records. They are part of a workflow's recorded history:
// a process that recovers a run must use the same ones, so they never
// change.
const (
	// WorkflowName is the name the run's workflow is registered under;
	// Options.Name is its instance's config name.
	WorkflowName = "toolguard.run"
	// TurnName is the step of one model turn.
	TurnName = "toolguard.turn"
	// DispatchName is the step of one tool call's dispatch.
	DispatchName = "toolguard.dispatch"
	// DecideName is the step that carries out a human's decision on a
	// tool call.
	DecideName = "toolguard.decide"
	// NotifyName is the step of Options.Notify.
	NotifyName = "toolguard.notify"
	// DeadlineName is the step that records a question's deadline and
	// the interval of its polls, when the question is published.
	DeadlineName = "toolguard.deadline"
	// PendingName is the workflow event holding the question a run
	// waits on (a host.ApprovalRequest), and null when it waits on none.
	PendingName = "toolguard.pending"
	// DecisionName is the topic of the messages that answer it
	// (a durable.Answer).
	DecisionName = "toolguard.decision"
)

// defaultName is the config name of an Agent whose Options name none.
const defaultName = "toolguard"

// defaultApprovalTimeout is how long a run waits for a human when its
// Options name no other time.
const defaultApprovalTimeout = 24 * time.Hour

// defaultTurnRetries is how many times a failed model turn is tried
// again, with backoff, when Options say nothing.
const defaultTurnRetries = 4

// defaultDecisionPoll is how often a run that waits for a decision looks
// for it besides DBOS's wake-up, when Options name no other interval.
const defaultDecisionPoll = 5 * time.Second

// Options configure an Agent. The zero value of every field means its
// default. ApprovalTimeout and Notify mean what they mean in
// tgtemporal.Options; the other fields are DBOS's own: Name (its
// instance), DecisionPoll (its wake-up can be missed), the retry counts
// (tgtemporal has activity options instead) and DataSource.
type Options struct {
	// Name is the Agent's config name: the DBOS instance its workflow is
	// registered and recorded under. Every process that runs or recovers
	// the Agent's runs registers it under the same name; two Agents of
	// one process need two names. Default "toolguard".
	Name string
	// ApprovalTimeout is how long a run waits for a human's decision; a
	// run that waited that long goes on with an expired denial
	// (host.Decision.Expired), which the model is told (guard.Expired).
	// Default 24 hours. The deadline is recorded when the
	// question is published (DeadlineName): a recovered run waits only
	// what is left, and a message for another question does not move it.
	ApprovalTimeout time.Duration
	// DecisionPoll is how often the wait looks for the decision besides
	// DBOS's wake-up, which a lost notification can miss: a decision is
	// seen within DecisionPoll of its message, whatever happened to the
	// wake-up. Each poll that finds nothing records two small DBOS steps
	// (a receive and its deadline): raise it for runs that wait long.
	// Default 5 seconds.
	DecisionPoll time.Duration
	// Notify, if set, tells the approvers that a run waits on req (a
	// chat message, an e-mail, an inbox row). key is the question's id
	// (durable.QuestionID): use it as the notification's idempotency key.
	// It is a DBOS step (NotifyName), recorded once Notify returned: once
	// per question, and again, with the same key, only when the process
	// died between the send and that record. An error is retried
	// (NotifyRetries), then ignored: the question stays readable with
	// Pending.
	Notify func(ctx context.Context, key string, req host.ApprovalRequest) error
	// NotifyRetries is how many times a failed Notify is tried again;
	// default 3, negative none.
	NotifyRetries int
	// TurnRetries is how many times a model turn that failed (the
	// provider's error, after its own client's retries) is tried again,
	// with backoff, before the run fails; default 4,
	// negative none.
	TurnRetries int
	// DataSource, with the guard on the Postgres store (a pgstore.Store
	// whose pool reaches the data source's database), makes the dispatch
	// of a transactional tool (pgstore.WriteTx) a DBOS transaction
	// (dbos.RunAsTransaction) instead of a step: the guard's reservation,
	// the tool's rows, the outcome and the audit record are written in
	// DBOS's transaction (pgstore.InTx) and commit with DBOS's record of
	// the step, or not at all. The tool's pgx.Tx then passes Exec, Query,
	// QueryRow and Begin (a savepoint) to DBOS's transaction and refuses
	// the rest (COPY, batches, prepared statements, large objects). Make
	// it with dbos.NewDataSource before Launch; nil runs such a dispatch as
	// a step, in a transaction of the store's own (docs/dbos.md).
	DataSource *dbos.DataSource
}

// Agent runs guarded agent runs as DBOS workflows: durable.Drive over a
// durable.Runner, with DBOS steps. Register it on every process that
// starts or recovers its runs, before dbos.Launch.
type Agent struct {
	runner *durable.Runner
	opts   Options
}

// ConfigName implements dbos.ConfiguredInstance: Options.Name.
func (a *Agent) ConfigName() string { return a.opts.Name }

// Register returns the Agent over r and registers its workflow with ctx,
// which must not be launched yet. The Runner's Host must have no
// Approver: a write that waits for a human is the run's durable wait, not
// an inline call in a step.
func Register(ctx dbos.Context, r *durable.Runner, opts Options) (a *Agent, err error) {
	if ctx == nil {
		return nil, errors.New("tgdbos: Register needs a DBOS context")
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("tgdbos: %w", err)
	}
	if opts.Name == "" {
		opts.Name = defaultName
	}
	if opts.NotifyRetries == 0 {
		opts.NotifyRetries = 3
	}
	if opts.TurnRetries == 0 {
		opts.TurnRetries = defaultTurnRetries
	}
	a = &Agent{runner: r, opts: opts.withDefaults()}
	defer func() {
		if v := recover(); v != nil {
			a, err = nil, fmt.Errorf("tgdbos: registering the workflow: %v", v)
		}
	}()
	dbos.RegisterWorkflow(ctx, a.Workflow, dbos.WithWorkflowName(WorkflowName), dbos.WithInstance(a))
	return a, nil
}

// ErrRunID is the error of a run whose id is not its workflow's id.
var ErrRunID = errors.New("tgdbos: a run's id must be its workflow's id")

// ErrOtherRun is Start's error for a run id that names a workflow
// started for another principal: its handle (and so its result) is not
// given out.
var ErrOtherRun = errors.New("tgdbos: the run id names another principal's run")

// Start starts run as a workflow whose id is run.ID (the run's scope:
// every write of the run gets its operation id from it), and returns its
// handle. A run is started once: starting a run id again returns the
// existing workflow's handle (DBOS's policy), the workflow's own input
// unchanged, when it was started for the same principal (tenant and
// subject), and fails with ErrOtherRun otherwise.
func (a *Agent) Start(ctx dbos.Context, run durable.Run) (dbos.WorkflowHandle[*durable.Result], error) {
	if run.ID == "" {
		return nil, fmt.Errorf("%w: the run has no id", ErrRunID)
	}
	if err := run.Principal.Validate(); err != nil {
		return nil, fmt.Errorf("tgdbos: run %q: %w", run.ID, err)
	}
	h, err := dbos.RunWorkflow(ctx, a.Workflow, run, dbos.WithWorkflowID(run.ID), dbos.WithRunInstance(a))
	if err != nil {
		return nil, err
	}
	// The workflow may have existed: its recorded input says whose it is.
	ws, err := dbos.ListWorkflows(ctx, dbos.WithFilterWorkflowIDs(run.ID), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return nil, fmt.Errorf("tgdbos: reading run %q: %w", run.ID, err)
	}
	if len(ws) != 1 {
		return nil, fmt.Errorf("tgdbos: run %q: %d workflows of that id", run.ID, len(ws))
	}
	was, ok := recordedRun(ws[0].Input)
	if !ok || was.Principal.TenantID != run.Principal.TenantID || was.Principal.SubjectID != run.Principal.SubjectID {
		return nil, fmt.Errorf("%w: %q", ErrOtherRun, run.ID)
	}
	return h, nil
}

// recordedRun reads a workflow's recorded input as a run: DBOS lists a
// JSON-serialized input as its JSON text, and others decoded.
func recordedRun(input any) (run durable.Run, ok bool) {
	b, isText := input.(string)
	raw := []byte(b)
	if !isText {
		var err error
		if raw, err = json.Marshal(input); err != nil {
			return run, false
		}
	}
	return run, json.Unmarshal(raw, &run) == nil
}

// Workflow is the run's workflow: durable.Drive with this package's
// steps. Run it with Start (or dbos.RunWorkflow with
// dbos.WithRunInstance(a) and the run's id as the workflow id); it fails
// with ErrRunID when run.ID is not the workflow's id.
func (a *Agent) Workflow(ctx dbos.Context, run durable.Run) (res *durable.Result, err error) {
	id, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return nil, fmt.Errorf("tgdbos: %w", err)
	}
	if run.ID != id {
		return nil, fmt.Errorf("%w: run %q in workflow %q", ErrRunID, run.ID, id)
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("tgdbos: run %q panicked: %v", id, v)
		}
	}()
	return durable.Drive(NewSteps(ctx, a.runner, a.opts), run)
}

// NewSteps returns the steps of the workflow running in ctx, for
// durable.Drive: TurnName and DispatchName/DecideName steps calling r,
// and the durable wait for a human. Agent.Workflow uses it; a host that
// writes its own workflow body around Drive uses it too.
func NewSteps(ctx dbos.Context, r *durable.Runner, opts Options) durable.Steps {
	return &steps{ctx: ctx, r: r, opts: opts.withDefaults()}
}

// withDefaults fills the wait's zero fields.
func (o Options) withDefaults() Options {
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = defaultApprovalTimeout
	}
	if o.DecisionPoll <= 0 {
		o.DecisionPoll = defaultDecisionPoll
	}
	return o
}

// steps are durable.Steps as DBOS steps of the workflow running in ctx.
type steps struct {
	ctx  dbos.Context
	r    *durable.Runner
	opts Options
}

// retries maps an Options retry count (negative: none) to DBOS's.
func retries(n int) int { return max(n, 0) }

// Turn is one model turn, the step TurnName.
func (s *steps) Turn(in durable.TurnInput) (durable.TurnOutput, error) {
	return dbos.RunAsStep(s.ctx, func(ctx context.Context) (durable.TurnOutput, error) {
		return s.r.Turn(ctx, in)
	}, dbos.WithStepName(TurnName), dbos.WithStepMaxRetries(retries(s.opts.TurnRetries)))
}

// Dispatch is one tool call, the step DispatchName, or DecideName when it
// carries a human's decision. It is not retried: its error is the host's
// (a programming error); everything that happens to a call is a result.
func (s *steps) Dispatch(in durable.DispatchInput) (durable.DispatchOutput, error) {
	name := DispatchName
	if in.Decision != nil {
		name = DecideName
	}
	if s.transactional(in.Call.Name) {
		return s.dispatchTx(in, name)
	}
	return dbos.RunAsStep(s.ctx, func(ctx context.Context) (durable.DispatchOutput, error) {
		// The step owns its write: the guard names it by the step's id,
		// which DBOS gives the step again when it runs it again.
		if dc, ok := ctx.(dbos.Context); ok {
			if id, err := dbos.GetStepID(dc); err == nil {
				in.Step = strconv.Itoa(id)
			}
		}
		return s.r.Dispatch(ctx, in)
	}, dbos.WithStepName(name))
}

// Approve records the question's deadline (DeadlineName), publishes req
// (PendingName), tells the approvers (Options.Notify, with the question's
// id as its key), and waits for the decision that answers req until the
// deadline; a message that answers another question is dropped, and the
// deadline stays. Past the deadline the decision is an expired denial.
// The event is cleared once decided.
func (s *steps) Approve(req host.ApprovalRequest) (host.Decision, error) {
	w, err := dbos.RunAsStep(s.ctx, func(context.Context) (wait, error) {
		now := time.Now()
		return wait{Start: now.UnixMilli(), Deadline: now.Add(s.opts.ApprovalTimeout).UnixMilli(),
			Poll: max(s.opts.DecisionPoll.Milliseconds(), 1)}, nil
	}, dbos.WithStepName(DeadlineName))
	if err != nil {
		return host.Decision{}, fmt.Errorf("tgdbos: recording the question's deadline: %w", err)
	}
	if err := dbos.SetEvent(s.ctx, PendingName, &req); err != nil {
		return host.Decision{}, fmt.Errorf("tgdbos: publishing the approval request: %w", err)
	}
	if s.opts.Notify != nil {
		// A notification that failed is not the run's failure: the
		// question stays readable (Pending) until answered.
		key := durable.QuestionID(req)
		_, _ = dbos.RunAsStep(s.ctx, func(ctx context.Context) (bool, error) {
			if err := host.Safely(func() error { return s.opts.Notify(ctx, key, req) }); err != nil {
				return false, err
			}
			return true, nil
		}, dbos.WithStepName(NotifyName), dbos.WithStepMaxRetries(retries(s.opts.NotifyRetries)))
	}
	d, err := s.await(req, w)
	if err != nil {
		return host.Decision{}, err
	}
	if err := dbos.SetEvent(s.ctx, PendingName, (*host.ApprovalRequest)(nil)); err != nil {
		return host.Decision{}, fmt.Errorf("tgdbos: clearing the approval request: %w", err)
	}
	return d, nil
}

// wait is a question's wait as DeadlineName records it, in Unix
// milliseconds: when it started, its deadline, and the interval of its
// polls. Everything the wait decides follows from it and from the recorded
// receives, so a recovered run takes the same path, whatever the clock or
// the Options of the process that recovers it.
type wait struct {
	Start    int64 `json:"start"`
	Deadline int64 `json:"deadline"`
	Poll     int64 `json:"poll"`
}

// await receives decision messages until one answers req or the deadline
// passes. Poll k (from 1) ends at Start + k·Poll, the last one at the
// deadline: a receive that times out moves to the next poll, so a lost
// wake-up delays a decision by one poll at most, and a message that
// answers another question is dropped within the same poll. A poll whose
// end has passed (a run recovered late) receives without waiting.
func (s *steps) await(req host.ApprovalRequest, w wait) (host.Decision, error) {
	for k := int64(1); ; {
		end := w.Start + k*w.Poll
		last := end >= w.Deadline
		if last {
			end = w.Deadline
		}
		msg, err := dbos.Recv[durable.Answer](s.ctx, DecisionName, max(time.Until(time.UnixMilli(end)), 0))
		switch {
		case errors.Is(err, dbos.ErrTimeout) && last:
			return host.Decision{Expired: true, Reason: "nobody decided in time"}, nil
		case errors.Is(err, dbos.ErrTimeout):
			k++
		case err != nil:
			return host.Decision{}, fmt.Errorf("tgdbos: waiting for the decision: %w", err)
		case msg.Answers(req):
			return msg.Decision, nil
		}
	}
}

// Pending returns the question the run workflowID waits on, nil when it
// waits on none: the request its workflow published (PendingName). It
// waits up to wait for a run that has published nothing yet (0: it does
// not wait). c is any DBOS context or client (dbos.NewClient) on the
// run's system database.
//
// Pending, Approve and Decide take tgtemporal's parameters in its order,
// less its ctx: a dbos.Client is itself the context.Context of the call.
// Only Pending's wait is DBOS's own: DBOS can wait for an event a run has
// not published yet, while Temporal's query answers only what is now.
func Pending(c dbos.Client, workflowID string, wait time.Duration) (*host.ApprovalRequest, error) {
	req, err := dbos.GetEvent[*host.ApprovalRequest](c, workflowID, PendingName, wait)
	if errors.Is(err, dbos.ErrTimeout) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tgdbos: reading run %q's question: %w", workflowID, err)
	}
	return req, nil
}

// ErrNoQuestion is Approve's error for a run that waits on no question.
var ErrNoQuestion = errors.New("tgdbos: the run waits on no question")

// Approve answers the question the run workflowID waits on now with d,
// from any process: Pending, then Decide. Who may decide is the caller's
// to check before: d.Approver is recorded in the grant and the audit log
// as given.
func Approve(c dbos.Client, workflowID string, d host.Decision) error {
	req, err := Pending(c, workflowID, 0)
	if err != nil {
		return err
	}
	if req == nil {
		return fmt.Errorf("%w: %q", ErrNoQuestion, workflowID)
	}
	return Decide(c, *req, d)
}

// Decide answers req, a question a run published, with d: a message to
// its workflow (req.RunID), sent through c (its context, as for Pending). A run that no longer waits on req drops it.
func Decide(c dbos.Client, req host.ApprovalRequest, d host.Decision) error {
	if req.RunID == "" {
		return errors.New("tgdbos: the request names no run")
	}
	m := durable.AnswerTo(req, d)
	if err := dbos.Send(c, req.RunID, m, DecisionName); err != nil {
		return fmt.Errorf("tgdbos: sending the decision to run %q: %w", req.RunID, err)
	}
	return nil
}

// defaultStartupTimeout bounds NewContext's connection to Postgres when
// its Config names no other time.
const defaultStartupTimeout = 20 * time.Second

// Config configures NewContext.
type Config struct {
	// DatabaseURL is the DBOS system database: a Postgres URL
	// (postgres://user:password@host:port/database). Required.
	DatabaseURL string
	// AppName names the application; required.
	AppName string
	// ApplicationVersion pins the version DBOS records with each
	// workflow. DBOS recovers only the workflows of its own version, and
	// by default derives it from the binary: set it, so that a new build
	// of the same code recovers the runs an old one left.
	ApplicationVersion string
	// ExecutorID is DBOS's executor id (DBOS__VMID overrides it, as in
	// DBOS; default "local"): Launch recovers the pending runs of this id
	// and version. Keep it the same across a process's restarts, and give
	// every process that runs at the same time its own: NewContext holds
	// the identity while the context lives, and refuses one a live
	// process holds (ErrExecutorBusy).
	ExecutorID string
	// StartupTimeout bounds connecting to Postgres and migrating the
	// system database, and the wait for an executor identity that a
	// process which is stopping still holds; default
	// 20 seconds.
	StartupTimeout time.Duration
	// Logger is DBOS's; default DBOS's own (standard output).
	Logger *slog.Logger
}

// NewContext returns a DBOS context over the system database c names,
// bounded in time: a Postgres that does not answer is an error naming
// the server (never the password) within c.StartupTimeout, not a hang.
// The context holds its executor identity (application, executor id and
// version) until it is shut down: a live process's identity is refused
// with ErrExecutorBusy, after waiting c.StartupTimeout for it to be freed
// (a process that stops frees it at once, one that died within about half
// a minute). Register the Agents on it, then dbos.Launch it (which
// recovers this identity's pending runs).
func NewContext(ctx context.Context, c Config) (dbos.Context, error) {
	if c.DatabaseURL == "" || c.AppName == "" {
		return nil, errors.New("tgdbos: NewContext needs a DatabaseURL (Postgres) and an AppName")
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = defaultStartupTimeout
	}
	dc, err := dbos.NewContext(ctx, dbos.Config{DatabaseURL: c.DatabaseURL, AppName: c.AppName, ExecutorID: c.ExecutorID,
		ApplicationVersion: c.ApplicationVersion, SystemDBStartupTimeout: c.StartupTimeout, Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("tgdbos: the DBOS system database (Postgres at %s) is not usable within %v: %w",
			redact(c.DatabaseURL), c.StartupTimeout, err)
	}
	if err := holdExecutor(ctx, c.DatabaseURL, c.AppName, dc, c.StartupTimeout, c.Logger); err != nil {
		_ = dbos.Shutdown(dc, time.Second)
		return nil, err
	}
	return dc, nil
}

// redact names a database URL's server and database, without its
// password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "the configured address"
	}
	return u.Host + u.Path
}
