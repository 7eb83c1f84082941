package tgdbos_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	tgdbos "github.com/toolguard/toolguard/integrations/dbos"
	"github.com/toolguard/toolguard/integrations/dbos/internal/pgtest"
	"github.com/toolguard/toolguard/internal/fakemodel"
)

// launchWorld builds a world in this process over a fresh database, with
// h's hooks, and launches DBOS; srv is the fake model.
func launchWorld(t *testing.T, db string, h hooks) (w *world, srv *fakemodel.OpenAIServer) {
	t.Helper()
	srv = modelServer(t, 400)
	redisURL, prefix := redisFor(t)
	e := env{Postgres: postgresURL(t, db), Redis: redisURL, Prefix: prefix, Model: srv.BaseURL()}
	w, err := buildWorld(context.Background(), e, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	if err := dbos.Launch(w.dc); err != nil {
		t.Fatal(err)
	}
	return w, srv
}

// TestOtherTenantGetsNotFound: a run of acme's drafts a refund (its
// operation id is the approval request's); a run started for globex whose
// model asks the status tool for that operation gets NOT_FOUND, while
// the same question in a run of acme's gets its outcome. The principal is
// the run's input, never the model's: a workflow cannot borrow another
// tenant's. Starting a run id that exists for another principal is
// refused.
func TestOtherTenantGetsNotFound(t *testing.T) {
	w, _ := launchWorld(t, "tenant", hooks{})
	h, err := w.agent.Start(w.dc, durable.Run{ID: "acme-refund", Principal: acme, Input: "refund ORDER-7"})
	if err != nil {
		t.Fatal(err)
	}
	req := waitPending(t, w.dc, "acme-refund")
	if req.Principal.TenantID != acme.TenantID || req.Tool != refundTool || req.OperationID == "" {
		t.Fatalf("pending %+v", req)
	}
	refusedToGlobex(t, w, "acme-refund") // running
	if err := tgdbos.Approve(w.dc, "acme-refund", host.Decision{Approved: true, Approver: "manager"}); err != nil {
		t.Fatal(err)
	}
	res, err := h.GetResult(dbos.WithHandleTimeout(deadline))
	if err != nil || res.Status != durable.StatusCompleted {
		t.Fatalf("acme's run: %+v, %v", res, err)
	}
	if p, err := tgdbos.Pending(w.dc, "acme-refund", 0); err != nil || p != nil {
		t.Errorf("after the decision, pending %+v, %v; want none", p, err)
	}

	for _, c := range []struct {
		id   string
		p    guard.Principal
		want string
	}{
		{"globex-status", globex, "status: NOT_FOUND"},
		{"acme-status", acme, "status: OK"},
	} {
		hs, err := w.agent.Start(w.dc, durable.Run{ID: c.id, Principal: c.p, Input: "status " + req.OperationID})
		if err != nil {
			t.Fatal(err)
		}
		r, err := hs.GetResult(dbos.WithHandleTimeout(deadline))
		if err != nil {
			t.Fatal(err)
		}
		if r.Output != c.want {
			t.Errorf("%s: %q, want %q", c.id, r.Output, c.want)
		}
	}

	refusedToGlobex(t, w, "acme-refund") // ended
	if n := w.shop.executions(context.Background(), "acme-refund", refundTool); n != 1 {
		t.Errorf("the refund ran %d times, want once", n)
	}
}

// refusedToGlobex checks that acme's run id started for globex (or for
// another subject of acme's) is refused: no handle, and nothing of the
// run (its status, its answer) in the error.
func refusedToGlobex(t *testing.T, w *world, id string) {
	t.Helper()
	for _, p := range []guard.Principal{globex, {TenantID: acme.TenantID, SubjectID: "mallory"}} {
		h, err := w.agent.Start(w.dc, durable.Run{ID: id, Principal: p, Input: "refund ORDER-7"})
		if !errors.Is(err, tgdbos.ErrOtherRun) || h != nil {
			t.Errorf("acme's run %s started for %s/%s: %v, %v; want ErrOtherRun and no handle", id, p.TenantID, p.SubjectID, h, err)
		}
		if err != nil && (strings.Contains(err.Error(), "DRAFT") || strings.Contains(err.Error(), "PENDING") || strings.Contains(err.Error(), "SUCCESS")) {
			t.Errorf("the refusal tells of the run: %v", err)
		}
	}
}

// waitPending waits for the run's question.
func waitPending(t *testing.T, c dbos.Client, id string) host.ApprovalRequest {
	t.Helper()
	req, err := tgdbos.Pending(c, id, deadline)
	if err != nil || req == nil {
		t.Fatalf("no question from %s: %v", id, err)
	}
	return *req
}

// TestPostgresDown: a system database that refuses connections, or
// accepts them and never answers, is an error within the startup bound
// (2s here), naming the server and not the password: not a hang.
func TestPostgresDown(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	refused, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{"refused": fmt.Sprintf("127.0.0.1:%d", refused), "silent": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			url := fmt.Sprintf("postgres://app:s3cret@%s/app?sslmode=disable&connect_timeout=1", addr)
			start := time.Now()
			dc, err := tgdbos.NewContext(context.Background(), tgdbos.Config{DatabaseURL: url, AppName: "tgdbos-down",
				StartupTimeout: 2 * time.Second, Logger: quietLogger()})
			took := time.Since(start)
			if err == nil {
				dbos.Shutdown(dc, time.Second)
				t.Fatal("no error for a Postgres that is down")
			}
			if took > 8*time.Second {
				t.Errorf("the error took %v, want it within the startup bound", took)
			}
			msg := err.Error()
			if !strings.Contains(msg, addr+"/app") || !strings.Contains(msg, "Postgres") || strings.Contains(msg, "s3cret") {
				t.Errorf("error %q: want the server named, without the password", msg)
			}
		})
	}
}
