package tgdbos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
)

// TestStaleMessagesKeepTheDeadline: a run waits 4 s for a decision;
// messages that answer other questions (a stale click, a repeated one, a
// message for a question of yesterday) arrive meanwhile and are dropped,
// and the run still gives up at its one deadline, not 4 s after the last
// of them. The model is told that nobody decided in time (not that a
// human declined), nothing runs, and the question is cleared.
func TestStaleMessagesKeepTheDeadline(t *testing.T) {
	const timeout = 4 * time.Second
	w, srv := launchWorld(t, "stale", hooks{options: func(o *tgdbos.Options) { o.ApprovalTimeout = timeout }})
	h, err := w.agent.Start(w.dc, durable.Run{ID: "stale-run", Principal: acme, Input: "refund ORDER-7"})
	if err != nil {
		t.Fatal(err)
	}
	req := waitPending(t, w.dc, "stale-run")
	asked := time.Now()
	for i, stale := range []host.ApprovalRequest{
		func() host.ApprovalRequest { r := req; r.OperationID = "op_of_another_question"; return r }(),
		func() host.ApprovalRequest { r := req; r.CallID = "call_of_yesterday"; return r }(),
		func() host.ApprovalRequest { r := req; r.Fingerprint = "another intent"; return r }(),
	} {
		time.Sleep(time.Second)
		if err := tgdbos.Decide(w.dc, stale, host.Decision{Approved: true, Approver: "someone"}); err != nil {
			t.Fatalf("stale message %d: %v", i, err)
		}
	}
	res, err := h.GetResult(dbos.WithHandleTimeout(deadline))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(asked)
	if took < timeout-500*time.Millisecond || took > timeout+3*time.Second {
		t.Errorf("the run waited %v after its question, want its one deadline, %v", took, timeout)
	}
	if len(res.Calls) < 2 || res.Calls[1].Code != "APPROVAL_REQUIRED" {
		t.Fatalf("calls %+v", res.Calls)
	}
	outs, err := srv.ModelResults()
	if err != nil {
		t.Fatal(err)
	}
	if got := outs[refundCall]; got.Code != guard.CodeApprovalRequired || got.Message != guard.ExpiredMessage {
		t.Errorf("the model got %+v, want the expired message", got)
	}
	if n := w.shop.executions(context.Background(), "stale-run", refundTool); n != 0 {
		t.Errorf("the refund ran %d times, want never", n)
	}
	if p, err := tgdbos.Pending(w.dc, "stale-run", 0); err != nil || p != nil {
		t.Errorf("after the deadline, pending %+v, %v; want none", p, err)
	}
}

// TestLostWakeUp: the decision's message is stored but its wake-up never
// comes (Postgres's trigger that notifies the waiting process is off while
// the message is sent). The run does not wait for its deadline (a minute):
// it finds the decision at its next poll (DecisionPoll, a second here).
func TestLostWakeUp(t *testing.T) {
	w, _ := launchWorld(t, "lostwake", hooks{})
	h, err := w.agent.Start(w.dc, durable.Run{ID: "lost-run", Principal: acme, Input: "refund ORDER-7"})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, w.dc, "lost-run")
	ctx := context.Background()
	mute := func(on bool) {
		verb := "ENABLE"
		if !on {
			verb = "DISABLE"
		}
		if _, err := w.shop.db.Exec(ctx, "ALTER TABLE dbos.notifications "+verb+" TRIGGER dbos_notifications_trigger"); err != nil {
			t.Fatal(err)
		}
	}
	// The human's process: a client of its own, whose message reaches
	// the run's process only through Postgres.
	client, err := dbos.NewClient(ctx, dbos.ClientConfig{DatabaseURL: w.env.Postgres, AppName: "tgdbos-test", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer dbos.Shutdown(client, 5*time.Second)
	mute(false)
	defer mute(true)
	if err := tgdbos.Approve(client, "lost-run", host.Decision{Approved: true, Approver: "manager"}); err != nil {
		t.Fatal(err)
	}
	decided := time.Now()
	mute(true)
	res, err := h.GetResult(dbos.WithHandleTimeout(deadline))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(decided); took > 5*time.Second {
		t.Errorf("the run ended %v after its decision, want within a poll or two", took)
	}
	if res.Status != durable.StatusCompleted || res.Output != wantOutput {
		t.Errorf("result %+v", res)
	}
	if n := w.shop.executions(ctx, "lost-run", refundTool); n != 1 {
		t.Errorf("the refund ran %d times, want once", n)
	}
}

// TestExecutorIdentity: a process runs a run that waits for its human. A
// second process launched with the same executor identity (DBOS's default
// one, as the second process was) is refused with ErrExecutorBusy,
// saying why, and so never recovers the first one's run (it would notify
// again and run its steps a second time). A process with an identity of
// its own starts, and leaves that run alone. Once the first process is
// killed, its identity is free at once: the process that takes it
// recovers the run, which ends once, notified once.
func TestExecutorIdentity(t *testing.T) {
	srv := modelServer(t, 400)
	redisURL, prefix := redisFor(t)
	run := durable.Run{ID: "identity-run", Principal: acme, Input: "refund ORDER-7"}
	e := env{Postgres: postgresURL(t, "identity"), Redis: redisURL, Prefix: prefix, Model: srv.BaseURL(), Runs: []durable.Run{run}}
	client, db := migratedClient(t, e.Postgres)
	first := startChild(t, roleStart, e)
	waitForRecv(t, client, run.ID)

	ctx := context.Background()
	start := time.Now()
	_, err := tgdbos.NewContext(ctx, tgdbos.Config{DatabaseURL: e.Postgres, AppName: "tgdbos-test", ApplicationVersion: "test",
		StartupTimeout: 2 * time.Second, Logger: quietLogger()})
	if !errors.Is(err, tgdbos.ErrExecutorBusy) || !strings.Contains(err.Error(), `executor "local"`) || !strings.Contains(err.Error(), "DBOS__VMID") {
		t.Fatalf("a second process with the same identity: %v, want ErrExecutorBusy naming it and what to do", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refused after %v, want within the startup bound", took)
	}

	other := e
	other.Executor, other.Runs = "host-2", nil
	w, err := buildWorld(ctx, other, hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dbos.Launch(w.dc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // what it would recover, it has by now
	w.close()
	if n := count(ctx, db, "SELECT count(*) FROM tg_notify_calls WHERE run_id = $1", run.ID); n != 1 {
		t.Errorf("the approvers were told %d times, want once: another process ran the run", n)
	}
	ws, err := dbos.ListWorkflows(client, dbos.WithFilterWorkflowIDs(run.ID))
	if err != nil || len(ws) != 1 || ws[0].ExecutorID != "local" || ws[0].Attempts != 1 {
		t.Fatalf("the run: %+v, %v; want it the first process's, run once", ws, err)
	}

	first.kill()
	human := &approver{client: client, id: run.ID}
	human.start(t)
	defer human.stop()
	res := startChild(t, roleRecover, e).result(t)
	if res.Status != durable.StatusCompleted || res.Output != wantOutput {
		t.Errorf("recovered run: %+v", res)
	}
	if n := count(ctx, db, "SELECT count(*) FROM tg_notify_calls WHERE run_id = $1", run.ID); n != 1 {
		t.Errorf("the approvers were told %d times, want once", n)
	}
}
