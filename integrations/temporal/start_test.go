package tgtemporal_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	tgtemporal "github.com/toolguard/toolguard/integrations/temporal"
)

// frontend is a Temporal frontend on the real gRPC API (the SDK's client
// dials it), with what Start and a run's Get use: workflow starts under
// the id reuse policy and the already-started error a server gives,
// descriptions (type, status, memo), histories (the started event's
// input; the completed event's result). It counts the reads of a
// workflow's result.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu          sync.Mutex
	wfs         map[string]*fakeRun // by workflow id: its latest run
	resultReads map[string]int      // by workflow id
	n           int
}

type fakeRun struct {
	runID, workflowType string
	input, result       *commonpb.Payloads
	memo                *commonpb.Memo
	closed              bool
}

func (f *frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *frontend) StartWorkflowExecution(_ context.Context, req *workflowservice.StartWorkflowExecutionRequest) (*workflowservice.StartWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.wfs[req.GetWorkflowId()]; w != nil &&
		(!w.closed || req.GetWorkflowIdReusePolicy() == enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE) {
		return nil, serviceerror.ToStatus(serviceerror.NewWorkflowExecutionAlreadyStarted(
			"Workflow execution is already running or closed under a policy that rejects a duplicate", req.GetRequestId(), w.runID)).Err()
	}
	f.n++
	w := &fakeRun{runID: fmt.Sprintf("run-%d", f.n), workflowType: req.GetWorkflowType().GetName(), input: req.GetInput(), memo: req.GetMemo()}
	f.wfs[req.GetWorkflowId()] = w
	return &workflowservice.StartWorkflowExecutionResponse{RunId: w.runID, Started: true}, nil
}

func (f *frontend) GetWorkflowExecutionHistory(_ context.Context, req *workflowservice.GetWorkflowExecutionHistoryRequest) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := req.GetExecution().GetWorkflowId()
	w := f.wfs[id]
	if w == nil || (req.GetExecution().GetRunId() != "" && req.GetExecution().GetRunId() != w.runID) {
		return nil, serviceerror.ToStatus(serviceerror.NewNotFound("workflow not found")).Err()
	}
	started := &historypb.HistoryEvent{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: w.workflowType}, Input: w.input}}}
	completed := &historypb.HistoryEvent{EventId: 2, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{
			Result: w.result}}}
	var events []*historypb.HistoryEvent
	switch {
	case req.GetHistoryEventFilterType() == enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT:
		f.resultReads[id]++
		if !w.closed {
			return nil, serviceerror.ToStatus(serviceerror.NewUnavailable("still running (the fake does not long-poll)")).Err()
		}
		events = []*historypb.HistoryEvent{completed}
	case w.closed:
		f.resultReads[id]++
		events = []*historypb.HistoryEvent{started, completed}
	default:
		events = []*historypb.HistoryEvent{started}
	}
	return &workflowservice.GetWorkflowExecutionHistoryResponse{History: &historypb.History{Events: events}}, nil
}

func (f *frontend) DescribeWorkflowExecution(_ context.Context, req *workflowservice.DescribeWorkflowExecutionRequest) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.wfs[req.GetExecution().GetWorkflowId()]
	if w == nil || (req.GetExecution().GetRunId() != "" && req.GetExecution().GetRunId() != w.runID) {
		return nil, serviceerror.ToStatus(serviceerror.NewNotFound("workflow not found")).Err()
	}
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if w.closed {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: req.GetExecution(), Type: &commonpb.WorkflowType{Name: w.workflowType}, Status: status, Memo: w.memo}}, nil
}

// complete ends a workflow with res as its result.
func (f *frontend) complete(t *testing.T, id string, res *durable.Result) {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(res)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wfs[id].result, f.wfs[id].closed = p, true
}

func (f *frontend) reads(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resultReads[id]
}

// dialFrontend starts a frontend on a free port and dials it with the
// SDK's client.
func dialFrontend(t *testing.T) (*frontend, client.Client) {
	t.Helper()
	f := &frontend{wfs: map[string]*fakeRun{}, resultReads: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	c, err := client.Dial(client.Options{HostPort: l.Addr().String(), Namespace: "default", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return f, c
}

// TestStartRefusesAnotherPrincipalsRun: Start checks the principal of a
// run id that exists, as tgdbos.Start does. Another tenant's (or another
// subject's) start of a run id, running or ended, is ErrOtherRun: no
// handle, and the run's status and result are never read; the same
// principal gets the existing run (its result), not a new one. A
// workflow of that id that Start did not start (no principal in its
// memo) is refused too.
func TestStartRefusesAnotherPrincipalsRun(t *testing.T) {
	f, c := dialFrontend(t)
	ctx := context.Background()
	opts := client.StartWorkflowOptions{TaskQueue: "agents"}
	var a tgtemporal.Agent // a process that only starts runs: no worker
	secret := &durable.Result{RunID: "r-ended", Status: durable.StatusCompleted, Output: "tenant-a's refund DRAFT-1 is ready"}
	for _, id := range []string{"r-ended", "r-running"} {
		if _, err := a.Start(ctx, c, opts, durable.Run{ID: id, Principal: user1, Input: "Refund ORDER-7."}); err != nil {
			t.Fatal(err)
		}
	}
	f.complete(t, "r-ended", secret)

	sameTenant := guard.Principal{TenantID: user1.TenantID, SubjectID: "user-2"}
	for _, id := range []string{"r-ended", "r-running"} {
		for _, p := range []guard.Principal{tenantB, sameTenant} {
			run, err := a.Start(ctx, c, opts, durable.Run{ID: id, Principal: p, Input: "What did tenant-a do?"})
			if !errors.Is(err, tgtemporal.ErrOtherRun) || run != nil {
				t.Errorf("%s started for %s/%s: %v, %v; want ErrOtherRun and no run", id, p.TenantID, p.SubjectID, run, err)
			}
			if err != nil && strings.Contains(err.Error(), "DRAFT-1") {
				t.Errorf("the error tells the other run's result: %v", err)
			}
		}
		if n := f.reads(id); n != 0 {
			t.Errorf("%s: its history (its result) was read %d times for another principal", id, n)
		}
	}

	run, err := a.Start(ctx, c, opts, durable.Run{ID: "r-ended", Principal: user1, Input: "Refund ORDER-7 again."})
	if err != nil || run.GetRunID() != "run-1" {
		t.Fatalf("started again by its principal: %v, %v; want the existing run-1", run, err)
	}
	var res durable.Result
	if err := run.Get(ctx, &res); err != nil || res.Output != secret.Output {
		t.Errorf("its result: %+v, %v", res, err)
	}
	if run, err := a.Start(ctx, c, opts, durable.Run{ID: "r-running", Principal: user1, Input: "x"}); err != nil || run.GetRunID() != "run-2" {
		t.Errorf("a running run started again by its principal: %v, %v; want run-2", run, err)
	}

	f.mu.Lock()
	f.wfs["r-other"] = &fakeRun{runID: "run-x", workflowType: "payroll"}
	f.mu.Unlock()
	if run, err := a.Start(ctx, c, opts, durable.Run{ID: "r-other", Principal: user1, Input: "x"}); err == nil || run != nil {
		t.Errorf("a workflow that is no run: %v, %v; want an error", run, err)
	}
}
