package tgmcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
)

// tasksExtension names the MCP Tasks extension (SEP-2663, protocol
// 2026-07-28), which the server advertises in its capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// The methods of the Tasks extension.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// The statuses of a task.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

const (
	// taskRetention is how long a task is kept after its question
	// expired: the time a client has to poll its outcome.
	taskRetention = time.Hour
	// pollInterval is the polling interval a task suggests.
	pollInterval = time.Second
	// runLease is how long a replica that runs a task's write owns the
	// run: a poll that finds the task still working after it (the replica
	// died) runs it again, and the guard replays what already ran.
	runLease = 30 * time.Second
	// retryLater is when a run the guard answered IN_PROGRESS or
	// UNAVAILABLE (nothing decided) is tried again by a poll.
	retryLater = 2 * time.Second
)

// task is a write that waits on a human, as the StateStore keeps it: the
// call (who, what, the operation it runs as), its question, and where it
// stands. Every replica reads and changes it there, each change a Swap of
// the whole record, so two replicas never both take an answer.
type task struct {
	ID        string                 `json:"id"`
	TenantID  string                 `json:"tenant"`
	SubjectID string                 `json:"subject"`
	Tool      string                 `json:"tool"`
	Arguments json.RawMessage        `json:"arguments"`
	Context   guard.ExecutionContext `json:"context"`
	Question  string                 `json:"question"`
	Status    string                 `json:"status"`
	Message   string                 `json:"message,omitempty"`
	Created   time.Time              `json:"created"`
	Updated   time.Time              `json:"updated"`
	// Expires is when the question stops taking an answer; Gone when the
	// task is forgotten.
	Expires time.Time `json:"expires"`
	Gone    time.Time `json:"gone"`
	// Approval is the signed grant of the human's yes; RunUntil is when
	// the replica running the write stops owning the run.
	Approval string          `json:"approval,omitempty"`
	RunUntil time.Time       `json:"run_until,omitzero"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *jsonrpc.Error  `json:"error,omitempty"`
}

// call is the guard call the task runs.
func (t *task) call() guard.Call {
	return guard.Call{
		Principal: guard.Principal{TenantID: t.TenantID, SubjectID: t.SubjectID},
		Proposal:  guard.Proposal{Name: t.Tool, Arguments: t.Arguments},
		Context:   t.Context,
		Approval:  t.Approval,
	}
}

// taskView is a task on the wire (SEP-2663's Task, with the payload of its
// status: DetailedTask), as tasks/get returns it and tools/call creates it
// (CreateTaskResult).
type taskView struct {
	sdk.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          int64               `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	InputRequests  sdk.InputRequestMap `json:"inputRequests,omitempty"`
	Result         json.RawMessage     `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// view returns the task as resultType says: "task" for a CreateTaskResult,
// "complete" for a tasks/get result (which carries the status's payload).
func (t *task) view(resultType string) *taskView {
	v := &taskView{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.Message,
		CreatedAt:      t.Created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt:  t.Updated.UTC().Format(time.RFC3339Nano),
		TTLMs:          t.Gone.Sub(t.Created).Milliseconds(),
		PollIntervalMs: pollInterval.Milliseconds(),
	}
	if resultType != "complete" {
		return v
	}
	switch t.Status {
	case taskInputRequired:
		v.InputRequests = sdk.InputRequestMap{approvalInput: &sdk.ElicitParams{Mode: "form", Message: t.Question, RequestedSchema: approveSchema}}
	case taskCompleted:
		v.Result = t.Result
	case taskFailed:
		v.Error = t.Error
	}
	return v
}

// taskIDParams are the params of tasks/get and tasks/cancel.
type taskIDParams struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// taskUpdateParams are the params of tasks/update.
type taskUpdateParams struct {
	sdk.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses"`
}

// ack is the empty result of tasks/update and tasks/cancel.
type ack struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

func newAck() *ack { return &ack{ResultType: "complete"} }

// taskSlot receives the task a tools/call created: the tool handler must
// return a CallToolResult, so the receiving middleware answers with the
// task instead (CreateTaskResult).
type taskSlot struct{ created *taskView }

type taskSlotKey struct{}

// caller is who sends a tasks/* request: the principal and the request's
// extra (its token's scopes), carried from the receiving middleware, which
// sees them, to the method's handler, which does not.
type caller struct {
	p     guard.Principal
	extra *sdk.RequestExtra
}

type callerKey struct{}

// addTasks registers the methods of the Tasks extension.
func (s *Server) addTasks() error {
	if err := sdk.AddReceivingCustomMethod(s.srv, methodTasksGet, s.tasksGet); err != nil {
		return err
	}
	if err := sdk.AddReceivingCustomMethod(s.srv, methodTasksUpdate, s.tasksUpdate); err != nil {
		return err
	}
	return sdk.AddReceivingCustomMethod(s.srv, methodTasksCancel, s.tasksCancel)
}

// isTaskMethod reports whether method is one of the Tasks extension's.
func isTaskMethod(method string) bool {
	return method == methodTasksGet || method == methodTasksUpdate || method == methodTasksCancel
}

// declaresTasks reports whether the request's client declared the Tasks
// extension (in its per-request capabilities on 2026-07-28).
func declaresTasks(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	_, ok := ip.Capabilities.Extensions[tasksExtension]
	return ok
}

// wantsTask reports whether a write that waits on its human becomes a
// task: the client is of protocol 2026-07-28 or later and declared the
// Tasks extension on this request, and the receiving middleware can answer
// with the task.
func wantsTask(ctx context.Context, req *sdk.CallToolRequest) bool {
	if _, ok := ctx.Value(taskSlotKey{}).(*taskSlot); !ok || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && modern(ip.ProtocolVersion) && declaresTasks(req.Session)
}

// errMissingTasks answers a tasks/* request whose client did not declare
// the extension (SEP-2663: -32021, naming the capability it needs).
var errMissingTasks = &jsonrpc.Error{Code: sdk.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability",
	Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)}

// errNoTask answers a task id that names no task of this principal: one
// that never was, expired or belongs to someone else look the same.
var errNoTask = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// createTask makes the write call, which waits on its human, a task in
// the StateStore, status input_required, and answers the tools/call with
// it (CreateTaskResult) through the request's slot; it returns nil then,
// and UNAVAILABLE when the store could not keep the task. The task runs as the
// operation the call would have run as (opOf); a call of the same
// principal and operation while its task still waits gets that task again,
// not a second question.
func (s *Server) createTask(ctx context.Context, call guard.Call) *guard.Result {
	now := s.opts.Clock.Now().UTC()
	op := s.opOf(call)
	call.Context.OperationID, call.Context.IdempotencyKey = op.OperationID, op.IdempotencyKey
	var id [16]byte
	_, _ = rand.Read(id[:])
	t := &task{
		ID:        "task_" + hex.EncodeToString(id[:]),
		TenantID:  call.Principal.TenantID,
		SubjectID: call.Principal.SubjectID,
		Tool:      call.Proposal.Name,
		Arguments: call.Proposal.Arguments,
		Context:   call.Context,
		Question:  s.approvalRequest(call).Message,
		Status:    taskInputRequired,
		Message:   "Waiting for a human to approve this action.",
		Created:   now,
		Updated:   now,
		Expires:   now.Add(s.opts.QuestionTTL),
		Gone:      now.Add(s.opts.QuestionTTL + taskRetention),
	}
	slot := ctx.Value(taskSlotKey{}).(*taskSlot)
	opKey := stateKey("optask", opDigest(call.Principal, op.OperationID))
	held, err := s.state.Claim(ctx, opKey, []byte(t.ID), s.opts.QuestionTTL)
	if err != nil {
		return unavailable()
	}
	if string(held) != t.ID {
		if old, _, err := s.loadTask(ctx, string(held)); err == nil && old != nil && old.Status == taskInputRequired &&
			now.Before(old.Expires) && old.TenantID == t.TenantID && old.SubjectID == t.SubjectID {
			slot.created = old.view("task")
			return nil
		}
		// The operation's earlier task is over: this one takes its place.
		if ok, err := s.state.Swap(ctx, opKey, held, []byte(t.ID), s.opts.QuestionTTL); err != nil || !ok {
			return unavailable()
		}
	}
	if _, err := s.saveTask(ctx, nil, t); err != nil {
		return unavailable()
	}
	slot.created = t.view("task")
	return nil
}

// opDigest names an operation of a principal in the StateStore, whatever
// its ids hold.
func opDigest(p guard.Principal, op string) string {
	h := sha256.Sum256([]byte(p.TenantID + "\x00" + p.SubjectID + "\x00" + op))
	return hex.EncodeToString(h[:16])
}

// loadTask returns the task and its record as stored, or nil.
func (s *Server) loadTask(ctx context.Context, id string) (*task, []byte, error) {
	raw, err := s.state.Get(ctx, stateKey("task", id))
	if err != nil || raw == nil {
		return nil, nil, err
	}
	var t task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, nil, err
	}
	return &t, raw, nil
}

// saveTask stores t: a new task when old is nil, else in place of the
// record old if it is still what is stored. It returns the new record, or
// nil when another replica changed the task first.
func (s *Server) saveTask(ctx context.Context, old []byte, t *task) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	ttl := t.Gone.Sub(s.opts.Clock.Now())
	if old == nil {
		got, err := s.state.Claim(ctx, stateKey("task", t.ID), raw, ttl)
		if err != nil || string(got) != string(raw) {
			return nil, errors.Join(err, errors.New("mcp: task id taken"))
		}
		return raw, nil
	}
	ok, err := s.state.Swap(ctx, stateKey("task", t.ID), old, raw, ttl)
	if err != nil || !ok {
		return nil, err
	}
	return raw, nil
}

// taskFor returns the task id names for the principal of the request, or
// errNoTask; the client must have declared the extension, and its token
// must grant the scopes of the task's tool (Options.ToolScopes), as a
// tools/call of it would need.
func (s *Server) taskFor(ctx context.Context, ss *sdk.ServerSession, id string) (*task, []byte, error) {
	if !declaresTasks(ss) {
		return nil, nil, errMissingTasks
	}
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		return nil, nil, errNoPrincipal
	}
	p := c.p
	t, raw, err := s.loadTask(ctx, id)
	if err != nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store is unavailable"}
	}
	if t == nil || t.TenantID != p.TenantID || t.SubjectID != p.SubjectID {
		return nil, nil, errNoTask
	}
	if missing := s.missingScopes(t.Tool, c.extra); len(missing) > 0 {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "insufficient scope: the token lacks " + strings.Join(missing, " ")}
	}
	return t, raw, nil
}

// tasksGet answers tasks/get from the StateStore, on any replica. It also
// moves the task on where time decided it: a question past its expiry
// completes with guard.Expired; a write whose runner stopped owning the run
// (its replica died) is run again by this poll, and the guard replays
// whatever already ran.
func (s *Server) tasksGet(ctx context.Context, ss *sdk.ServerSession, p *taskIDParams) (*taskView, error) {
	t, raw, err := s.taskFor(ctx, ss, p.TaskID)
	if err != nil {
		return nil, err
	}
	now := s.opts.Clock.Now()
	switch {
	case t.Status == taskInputRequired && !now.Before(t.Expires):
		t = s.complete(ctx, t, raw, guard.Expired())
	case t.Status == taskWorking && !now.Before(t.RunUntil):
		t = s.run(ctx, t, raw)
	}
	return t.view("complete"), nil
}

// tasksUpdate takes the human's answer to a task's question (tasks/update),
// on any replica: the first answer wins (the task's record is swapped from
// input_required), and any other answer, or an answer to a task that asks
// nothing, is ignored, as SEP-2663 has it. A yes mints the grant and runs
// the write before the acknowledgement; a no completes the task with
// APPROVAL_REQUIRED and guard.DeclinedMessage.
func (s *Server) tasksUpdate(ctx context.Context, ss *sdk.ServerSession, p *taskUpdateParams) (*ack, error) {
	t, raw, err := s.taskFor(ctx, ss, p.TaskID)
	if err != nil {
		return nil, err
	}
	resp, ok := p.InputResponses[approvalInput]
	if t.Status != taskInputRequired || !ok {
		return newAck(), nil
	}
	now := s.opts.Clock.Now()
	if !now.Before(t.Expires) {
		s.complete(ctx, t, raw, guard.Expired())
		return newAck(), nil
	}
	if r, _ := resp.(*sdk.ElicitResult); r == nil || r.Action != "accept" || r.Content["approve"] != true {
		s.complete(ctx, t, raw, guard.Declined(""))
		return newAck(), nil
	}
	call := t.call()
	tok, err := s.grant(&call, t.ID)
	if err != nil {
		return nil, hostError(err)
	}
	next := *t
	next.Status, next.Message, next.Approval = taskWorking, "Approved; running.", tok
	next.Updated, next.RunUntil = now.UTC(), now.Add(runLease)
	saved, err := s.saveTask(ctx, raw, &next)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store is unavailable"}
	}
	if saved != nil {
		s.run(ctx, &next, saved)
	}
	return newAck(), nil
}

// tasksCancel cancels a task whose question is unanswered; a task already
// running or over is left as it is (cancellation is cooperative, and a
// write that started is the guard's to finish).
func (s *Server) tasksCancel(ctx context.Context, ss *sdk.ServerSession, p *taskIDParams) (*ack, error) {
	t, raw, err := s.taskFor(ctx, ss, p.TaskID)
	if err != nil {
		return nil, err
	}
	if t.Status == taskInputRequired {
		next := *t
		next.Status, next.Message, next.Updated = taskCancelled, "Cancelled before anyone answered; nothing ran.", s.opts.Clock.Now().UTC()
		_, _ = s.saveTask(ctx, raw, &next)
	}
	return newAck(), nil
}

// run dispatches the task's write with its grant, on behalf of whoever
// owns the run now, and stores its outcome: a result the guard decided
// completes the task; IN_PROGRESS (another run holds the operation) and
// UNAVAILABLE (nothing ran) leave it working, for a later poll to run
// again. The dispatch does not end with the request that caused it.
func (s *Server) run(ctx context.Context, t *task, raw []byte) *task {
	ctx = context.WithoutCancel(ctx)
	now := s.opts.Clock.Now()
	if !now.Before(t.RunUntil) {
		// Take the run over from a runner that stopped owning it.
		next := *t
		next.RunUntil, next.Updated = now.Add(runLease), now.UTC()
		saved, err := s.saveTask(ctx, raw, &next)
		if err != nil || saved == nil {
			return t // another replica took it, or the store is away
		}
		t, raw = &next, saved
	}
	res, err := s.g.Dispatch(ctx, t.call())
	if err != nil {
		next := *t
		next.Status, next.Updated = taskFailed, s.opts.Clock.Now().UTC()
		werr, _ := hostError(err).(*jsonrpc.Error)
		next.Error, next.Message = werr, "The call could not be dispatched."
		if saved, _ := s.saveTask(ctx, raw, &next); saved != nil {
			return &next
		}
		return t
	}
	if res.Code == guard.CodeInProgress || res.Code == guard.CodeUnavailable {
		next := *t
		next.RunUntil, next.Updated = s.opts.Clock.Now().Add(retryLater), s.opts.Clock.Now().UTC()
		if saved, _ := s.saveTask(ctx, raw, &next); saved != nil {
			return &next
		}
		return t
	}
	return s.complete(ctx, t, raw, res)
}

// complete stores res as the task's result (status completed, a
// CallToolResult of the model result, isError and all), if the task still
// has the status t has: a record another replica changed meanwhile (a poll
// that took over the run and found it in progress) is read again and
// completed all the same. It returns the task as it stands.
func (s *Server) complete(ctx context.Context, t *task, raw []byte, res *guard.Result) *task {
	b, err := json.Marshal(toolResult(res))
	if err != nil {
		return t
	}
	from := t.Status
	for range 3 {
		next := *t
		next.Status, next.Result, next.Updated = taskCompleted, b, s.opts.Clock.Now().UTC()
		next.Message = res.Code.String()
		if saved, err := s.saveTask(ctx, raw, &next); err != nil {
			return t
		} else if saved != nil {
			return &next
		}
		cur, curRaw, err := s.loadTask(ctx, t.ID)
		if err != nil || cur == nil {
			return t
		}
		if cur.Status != from {
			return cur
		}
		t, raw = cur, curRaw
	}
	return t
}
