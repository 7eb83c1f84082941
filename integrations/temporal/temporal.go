package tgtemporal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// The names Temporal records. They are part of a workflow's history: every
// worker that runs or replays a run must use the same ones, so they never
// change.
const (
	// WorkflowName is the workflow type of a run.
	WorkflowName = "toolguard.run"
	// TurnName is the activity type of one model turn.
	TurnName = "toolguard.turn"
	// DispatchName is the activity type of one tool call's dispatch
	// (with a human's decision or without).
	DispatchName = "toolguard.dispatch"
	// NotifyName is the activity type that tells the approvers a run
	// waits on a question (Options.Notify).
	NotifyName = "toolguard.notify"
	// PendingName is the query answering the question a run waits on (a
	// *host.ApprovalRequest), null when it waits on none.
	PendingName = "toolguard.pending"
	// DecisionName is the signal that answers it (a durable.Answer).
	DecisionName = "toolguard.decision"
)

// Error types of the activities' application errors.
const (
	// ErrTypeInProgress is the retryable error of a dispatch attempt that
	// found its operation running in another attempt.
	ErrTypeInProgress = "toolguard.InProgress"
	// errTypeRunner is the non-retryable error of a step whose Runner is
	// not set up, or whose provider panicked.
	errTypeRunner = "toolguard.Runner"
)

// defaultApprovalTimeout is how long a run waits for a human when its
// Options name no other time.
const defaultApprovalTimeout = 24 * time.Hour

// defaultTurnOptions are the activity options of a model turn when Options
// name none: two minutes an attempt (a model's reply can be slow), five
// attempts with backoff from one second to a minute. The provider's own
// client retries inside an attempt too.
func defaultTurnOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 5, NonRetryableErrorTypes: []string{errTypeRunner}},
	}
}

// defaultDispatchOptions are the activity options of a dispatch when
// Options name none: one minute an attempt, ten attempts with backoff from
// one second to thirty. Retrying a dispatch is safe: a retried attempt
// replays the stored outcome.
func defaultDispatchOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 10, NonRetryableErrorTypes: []string{errTypeRunner}},
	}
}

// defaultNotifyOptions are the activity options of a notification when
// Options name none: thirty seconds an attempt, four attempts with
// backoff from one second. A notification that still failed is left: the
// question stays readable (Pending).
func defaultNotifyOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, MaximumAttempts: 4},
	}
}

// Options configure the workflow. Every worker of a task queue must run
// its runs with the same Options: they decide what the workflow records.
// The zero value of every field means its default. ApprovalTimeout and
// Notify mean what they mean in tgdbos.Options; the activity options
// (Turn, Dispatch, NotifyActivity) are Temporal's own, where tgdbos has
// retry counts (TurnRetries, NotifyRetries).
type Options struct {
	// Turn is the activity options of a model turn; a zero
	// StartToCloseTimeout (with a zero ScheduleToCloseTimeout) means
	// two minutes an attempt, five attempts with backoff, and a nil
	// RetryPolicy that policy.
	Turn workflow.ActivityOptions
	// Dispatch is the activity options of a dispatch, defaulted alike
	// (a minute an attempt, ten attempts).
	Dispatch workflow.ActivityOptions
	// NotifyActivity is the activity options of a notification,
	// defaulted alike (30 seconds an attempt).
	NotifyActivity workflow.ActivityOptions
	// ApprovalTimeout is how long a run waits for a human's decision; a
	// run that waited that long goes on with an expired denial
	// (host.Decision.Expired), which the model is told (guard.Expired).
	// Default 24 hours. The timer is durable and started
	// once, when the question is published: a run replayed on another
	// worker waits only what is left, and a signal for another question
	// does not move it.
	ApprovalTimeout time.Duration
	// Notify, if set, tells the approvers that a run waits on req (a
	// chat message, an e-mail, an inbox row), in the activity
	// NotifyName, which every question runs (a no-op on a worker
	// without Notify). key is the question's id (durable.QuestionID): use
	// it as the notification's idempotency key. Temporal records the
	// activity once Notify returned: it runs again, with the same key,
	// only when its attempt failed or its worker died before that (after
	// the send, too). A notification that still fails after its retries
	// is left: the question stays readable with Pending. Register gives
	// it to the worker's activities; the workflow does not use it.
	Notify func(ctx context.Context, key string, req host.ApprovalRequest) error
}

// withDefaults fills o's zero fields.
func (o Options) withDefaults() Options {
	o.Turn = activityDefaults(o.Turn, defaultTurnOptions())
	o.Dispatch = activityDefaults(o.Dispatch, defaultDispatchOptions())
	o.NotifyActivity = activityDefaults(o.NotifyActivity, defaultNotifyOptions())
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = defaultApprovalTimeout
	}
	return o
}

func activityDefaults(o, def workflow.ActivityOptions) workflow.ActivityOptions {
	if o.StartToCloseTimeout <= 0 && o.ScheduleToCloseTimeout <= 0 {
		o.StartToCloseTimeout = def.StartToCloseTimeout
	}
	if o.RetryPolicy == nil {
		o.RetryPolicy = def.RetryPolicy
	}
	return o
}

// Activities are a run's activities, in a worker: they call the Runner.
// Register them (Register, or RegisterActivities) on every worker of the
// task queue.
type Activities struct {
	// Runner runs the steps. Its Host must have no Approver: a write that
	// waits for a human is the run's durable wait.
	Runner *durable.Runner
	// Notify tells the approvers of a question (Options.Notify); nil
	// tells nobody.
	Notify func(ctx context.Context, key string, req host.ApprovalRequest) error
}

// Turn is the activity TurnName: durable.Runner.Turn. A provider that
// panicked, or a Runner that is not set up, fails the activity without
// retries.
func (a *Activities) Turn(ctx context.Context, in durable.TurnInput) (durable.TurnOutput, error) {
	if a == nil || a.Runner == nil {
		return durable.TurnOutput{}, temporal.NewNonRetryableApplicationError("tgtemporal: no Runner", errTypeRunner, nil)
	}
	out, err := a.Runner.Turn(ctx, in)
	if errors.Is(err, durable.ErrProviderPanic) || (err != nil && (a.Runner.Host == nil || a.Runner.Provider == nil)) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), errTypeRunner, err)
	}
	return out, err
}

// Dispatch is the activity DispatchName: durable.Runner.Dispatch, in
// the run's scope, as the step the activity is (its activity id, the same
// in every attempt): an attempt after one whose worker died settles the
// write that attempt reserved instead of waiting for it. An attempt whose
// answer is IN_PROGRESS (another step of the same intent runs it right
// now) fails retryably (ErrTypeInProgress), so that a later attempt is
// given its stored outcome; a panic in the host step fails the attempt,
// and nothing reaches the worker.
func (a *Activities) Dispatch(ctx context.Context, in durable.DispatchInput) (out durable.DispatchOutput, err error) {
	if a == nil || a.Runner == nil || a.Runner.Host == nil {
		return out, temporal.NewNonRetryableApplicationError("tgtemporal: no Runner with a Host", errTypeRunner, nil)
	}
	if activity.IsActivity(ctx) {
		in.Step = activity.GetInfo(ctx).ActivityID
	}
	if err := host.Safely(func() (err error) { out, err = a.Runner.Dispatch(ctx, in); return err }); err != nil {
		return durable.DispatchOutput{}, err
	}
	if out.Ask == nil && len(out.Result) > 0 {
		var r guard.Result
		if r.UnmarshalJSON(out.Result) == nil && r.Code == guard.CodeInProgress {
			return durable.DispatchOutput{}, temporal.NewApplicationError(
				fmt.Sprintf("tgtemporal: call %s: its operation runs in another attempt", in.Call.ID), ErrTypeInProgress)
		}
	}
	return out, nil
}

// NotifyApprovers is the activity NotifyName: Notify with the
// question's id as its key, a panic an error of the attempt.
func (a *Activities) NotifyApprovers(ctx context.Context, req host.ApprovalRequest) error {
	if a == nil || a.Notify == nil {
		return nil
	}
	return host.Safely(func() error { return a.Notify(ctx, durable.QuestionID(req), req) })
}

// RegisterActivities registers a's activities on r (a worker) under
// TurnName, DispatchName and NotifyName.
func RegisterActivities(r worker.ActivityRegistry, a *Activities) {
	r.RegisterActivityWithOptions(a.Turn, activity.RegisterOptions{Name: TurnName})
	r.RegisterActivityWithOptions(a.Dispatch, activity.RegisterOptions{Name: DispatchName})
	r.RegisterActivityWithOptions(a.NotifyApprovers, activity.RegisterOptions{Name: NotifyName})
}

// Agent starts guarded agent runs as Temporal workflows: durable.Drive
// over a durable.Runner, with activities (tgdbos.Agent's counterpart).
// Register returns it on a worker; Start needs no worker, so a process
// that only starts runs uses the zero Agent.
type Agent struct{}

// Register registers the workflow (under WorkflowName, with opts) and the
// activities over runner (and opts.Notify) on w, and returns the Agent
// that starts its runs. It fails for a Runner without a Host or a
// Provider, or whose Host has an Approver.
func Register(w worker.Registry, runner *durable.Runner, opts Options) (*Agent, error) {
	if w == nil {
		return nil, errors.New("tgtemporal: Register needs a worker")
	}
	if err := runner.Validate(); err != nil {
		return nil, fmt.Errorf("tgtemporal: %w", err)
	}
	w.RegisterWorkflowWithOptions(newWorkflow(opts), workflow.RegisterOptions{Name: WorkflowName})
	RegisterActivities(w, &Activities{Runner: runner, Notify: opts.Notify})
	return &Agent{}, nil
}

// ErrRunID is the error of a run whose id is not its workflow's id.
var ErrRunID = errors.New("tgtemporal: a run's id must be its workflow's id")

// newWorkflow returns the run's workflow function with opts: durable.Drive
// with this package's steps. Start it with Agent.Start (or
// client.ExecuteWorkflow with WorkflowName and the run's id as the
// workflow id); a run whose id is not the workflow's id fails with
// ErrRunID, and nothing runs.
func newWorkflow(opts Options) func(ctx workflow.Context, run durable.Run) (*durable.Result, error) {
	opts = opts.withDefaults()
	return func(ctx workflow.Context, run durable.Run) (res *durable.Result, err error) {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		if run.ID != id {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%v: run %q in workflow %q", ErrRunID, run.ID, id), "toolguard.RunID", nil)
		}
		s := &steps{ctx: ctx, opts: opts}
		if err := workflow.SetQueryHandler(ctx, PendingName, func() (*host.ApprovalRequest, error) { return s.pending, nil }); err != nil {
			return nil, err
		}
		defer func() {
			if v := recover(); v != nil {
				res, err = nil, fmt.Errorf("tgtemporal: run %q panicked: %v", id, v)
			}
		}()
		return durable.Drive(s, run)
	}
}

// steps are durable.Steps as activities of the workflow running in ctx.
type steps struct {
	ctx     workflow.Context
	opts    Options
	pending *host.ApprovalRequest
}

// Turn is one model turn, the activity TurnName.
func (s *steps) Turn(in durable.TurnInput) (out durable.TurnOutput, err error) {
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(s.ctx, s.opts.Turn), TurnName, in).Get(s.ctx, &out)
	return out, err
}

// Dispatch is one tool call, the activity DispatchName.
func (s *steps) Dispatch(in durable.DispatchInput) (out durable.DispatchOutput, err error) {
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(s.ctx, s.opts.Dispatch), DispatchName, in).Get(s.ctx, &out)
	return out, err
}

// Approve publishes req (PendingName), starts the question's one timer,
// tells the approvers (NotifyName, whose failure is left), and waits
// for the signal that answers req; a signal that answers another question
// is dropped, and the timer runs on. After Options.ApprovalTimeout
// without one, the decision is an expired denial.
func (s *steps) Approve(req host.ApprovalRequest) (host.Decision, error) {
	s.pending = &req
	defer func() { s.pending = nil }()
	ctx, cancel := workflow.WithCancel(s.ctx)
	defer cancel()
	timer := workflow.NewTimer(ctx, s.opts.ApprovalTimeout)
	_ = workflow.ExecuteActivity(workflow.WithActivityOptions(s.ctx, s.opts.NotifyActivity), NotifyName, req).Get(s.ctx, nil)
	signals := workflow.GetSignalChannel(s.ctx, DecisionName)
	var (
		d    host.Decision
		done bool
	)
	sel := workflow.NewSelector(s.ctx)
	sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
		var m durable.Answer
		c.Receive(s.ctx, &m)
		if m.Answers(req) {
			d, done = m.Decision, true
		}
	})
	sel.AddFuture(timer, func(workflow.Future) {
		d, done = host.Decision{Expired: true, Reason: "nobody decided in time"}, true
	})
	for !done {
		sel.Select(s.ctx)
	}
	return d, nil
}

// ErrOtherRun is Start's error for a run id that names a workflow started
// for another principal: its handle (and so its status and result) is not
// given out.
var ErrOtherRun = errors.New("tgtemporal: the run id names another principal's run")

// memoKey is the memo under which Start records whom a run acts
// for (its tenant and subject), so that starting its id again is checked
// without reading the run's input or result.
const memoKey = "toolguard.principal"

// memoPrincipal is the memoKey memo's value.
type memoPrincipal struct {
	TenantID  string `json:"tenant_id"`
	SubjectID string `json:"subject_id"`
}

// Start starts run as the workflow WorkflowName whose id is run.ID (the
// run's scope: every write of the run gets its operation id from it), on
// opts (its TaskQueue; its ID, if set, must be run.ID), with its principal
// in the memo memoKey. It uses no state of a: the zero Agent starts runs
// too. A run is started once: starting a run id that
// was started before, running or closed, returns that workflow's run, its
// own recorded input unchanged, when it was started for the same principal
// (tenant and subject), and fails with ErrOtherRun otherwise (also for a
// workflow that Start did not start), giving out nothing of it: neither
// its handle, nor its status, nor its result. (Start sets opts'
// WorkflowIDReusePolicy to reject a duplicate, and
// WorkflowExecutionErrorWhenAlreadyStarted.) Give every run a new id.
func (a *Agent) Start(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, run durable.Run) (client.WorkflowRun, error) {
	if run.ID == "" || (opts.ID != "" && opts.ID != run.ID) {
		return nil, fmt.Errorf("%w: run %q, workflow %q", ErrRunID, run.ID, opts.ID)
	}
	if err := run.Principal.Validate(); err != nil {
		return nil, fmt.Errorf("tgtemporal: run %q: %w", run.ID, err)
	}
	opts.ID = run.ID
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	memo := make(map[string]any, len(opts.Memo)+1)
	maps.Copy(memo, opts.Memo)
	memo[memoKey] = memoPrincipal{TenantID: run.Principal.TenantID, SubjectID: run.Principal.SubjectID}
	opts.Memo = memo
	wr, err := c.ExecuteWorkflow(ctx, opts, WorkflowName, run)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &started) {
		return wr, err
	}
	// The workflow existed: its memo says whose it is.
	d, err := c.DescribeWorkflowExecution(ctx, run.ID, started.RunId)
	if err != nil {
		return nil, fmt.Errorf("tgtemporal: reading run %q: %w", run.ID, err)
	}
	var was memoPrincipal
	f := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[memoKey]
	if f == nil || d.GetWorkflowExecutionInfo().GetType().GetName() != WorkflowName ||
		converter.GetDefaultDataConverter().FromPayload(f, &was) != nil ||
		was.TenantID != run.Principal.TenantID || was.SubjectID != run.Principal.SubjectID {
		return nil, fmt.Errorf("%w: %q", ErrOtherRun, run.ID)
	}
	return c.GetWorkflow(ctx, run.ID, started.RunId), nil
}

// Pending returns the question the run workflowID waits on, nil when it
// waits on none (the query PendingName). It answers what is now: unlike
// tgdbos.Pending it has no wait, which a query cannot express; poll it
// for a run that has not asked yet.
func Pending(ctx context.Context, c client.Client, workflowID string) (*host.ApprovalRequest, error) {
	v, err := c.QueryWorkflow(ctx, workflowID, "", PendingName)
	if err != nil {
		return nil, fmt.Errorf("tgtemporal: reading run %q's question: %w", workflowID, err)
	}
	var req *host.ApprovalRequest
	if err := v.Get(&req); err != nil {
		return nil, fmt.Errorf("tgtemporal: reading run %q's question: %w", workflowID, err)
	}
	return req, nil
}

// ErrNoQuestion is Approve's error for a run that waits on no question.
var ErrNoQuestion = errors.New("tgtemporal: the run waits on no question")

// Approve answers the question the run workflowID waits on now with d,
// from any process: Pending, then Decide. Who may decide is the caller's
// to check before: d.Approver is recorded in the grant and the audit log
// as given.
func Approve(ctx context.Context, c client.Client, workflowID string, d host.Decision) error {
	req, err := Pending(ctx, c, workflowID)
	if err != nil {
		return err
	}
	if req == nil {
		return fmt.Errorf("%w: %q", ErrNoQuestion, workflowID)
	}
	return Decide(ctx, c, *req, d)
}

// Decide answers req, a question a run published, with d: the signal
// DecisionName to its workflow (req.RunID). A run that no longer waits
// on req drops it.
func Decide(ctx context.Context, c client.Client, req host.ApprovalRequest, d host.Decision) error {
	if req.RunID == "" {
		return errors.New("tgtemporal: the request names no run")
	}
	if err := c.SignalWorkflow(ctx, req.RunID, "", DecisionName, durable.AnswerTo(req, d)); err != nil {
		return fmt.Errorf("tgtemporal: sending the decision to run %q: %w", req.RunID, err)
	}
	return nil
}
