package agentloop_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// Rate limits and server errors the client's retries absorb do not show.
func TestProviderRetries(t *testing.T) {
	w := newWorld(t,
		fakemodel.Turn{Status: http.StatusTooManyRequests},
		calls(call("r1", readTool, readArgs)),
		fakemodel.Turn{Status: http.StatusInternalServerError},
		fakemodel.Turn{Status: http.StatusBadGateway},
		fakemodel.Turn{Text: "ORDER-7 is paid."},
	)
	res, err := w.loop().Run(testCtx(t), user1, "ORDER-7?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "ORDER-7 is paid." || res.Turns != 2 {
		t.Fatalf("status %q output %q turns %d", res.Status, res.Output, res.Turns)
	}
	reqs := w.srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	for i, want := range []struct {
		status int
		retry  string
	}{{429, "0"}, {200, "1"}, {500, "0"}, {502, "1"}, {200, "2"}} {
		if reqs[i].StatusCode != want.status || reqs[i].Header.Get("X-Stainless-Retry-Count") != want.retry {
			t.Errorf("request %d: status %d retry %q, want %d %q", i, reqs[i].StatusCode, reqs[i].Header.Get("X-Stainless-Retry-Count"), want.status, want.retry)
		}
	}
	// The retried requests are the same request: same chain, same outputs.
	if reqs[2].PreviousResponseID != reqs[1].ResponseID || reqs[4].PreviousResponseID != reqs[1].ResponseID ||
		string(reqs[2].Body) != string(reqs[4].Body) {
		t.Errorf("retries differ:\n%s\n%s", reqs[2].Body, reqs[4].Body)
	}
	if o := outputsOf(t, reqs[4]); len(o) != 1 || o[0].Result.Code != guard.CodeOK {
		t.Errorf("outputs %+v", o)
	}
	if w.svc.Calls() != 1 {
		t.Errorf("the read ran %d times", w.svc.Calls())
	}
}

// A provider that keeps failing ends the run with an error and the
// transcript so far.
func TestProviderKeepsFailing(t *testing.T) {
	w := newWorld(t,
		calls(call("r1", readTool, readArgs)),
		fakemodel.Turn{Status: 500},
		fakemodel.Turn{Status: 500},
		fakemodel.Turn{Status: 500},
		fakemodel.Turn{Text: "never reached"},
	)
	res, err := w.loop().Run(testCtx(t), user1, "ORDER-7?")
	if err == nil {
		t.Fatal("no error")
	}
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
		t.Errorf("error %v is not the provider's 500", err)
	}
	if res == nil {
		t.Fatal("no result with the error")
	}
	if got := kinds(res.Transcript); got != "user,call,result" || res.Turns != 1 || res.Status == agentloop.StatusCompleted {
		t.Errorf("result: status %q turns %d transcript %s", res.Status, res.Turns, got)
	}
	if n := len(w.srv.Requests()); n != 4 || w.srv.Remaining() != 1 {
		t.Errorf("%d requests, %d turns left; want 4 and 1", n, w.srv.Remaining())
	}
}

// An error the client does not retry ends the run at once.
func TestProviderBadRequest(t *testing.T) {
	w := newWorld(t, fakemodel.Turn{Status: http.StatusBadRequest, Error: &fakemodel.Error{Message: "bad", Code: "invalid_value"}})
	res, err := w.loop().Run(testCtx(t), user1, "hi")
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || res == nil || res.Turns != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(w.srv.Requests()) != 1 {
		t.Errorf("%d requests", len(w.srv.Requests()))
	}
}

// A response without output items completes the run with no text.
func TestEmptyResponse(t *testing.T) {
	w := newWorld(t,
		calls(call("r1", readTool, readArgs)),
		fakemodel.Turn{Empty: true},
		fakemodel.Turn{Text: "never reached"},
	)
	res, err := w.loop().Run(testCtx(t), user1, "ORDER-7?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentloop.StatusCompleted || res.Output != "" || res.Turns != 2 {
		t.Fatalf("status %q output %q turns %d", res.Status, res.Output, res.Turns)
	}
	if w.srv.Remaining() != 1 {
		t.Errorf("%d turns left", w.srv.Remaining())
	}
}

func TestCancelledBeforeRun(t *testing.T) {
	w := newWorld(t, fakemodel.Turn{Text: "never"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := w.loop().Run(ctx, user1, "hi")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if res == nil || res.Status == agentloop.StatusCompleted || res.Turns != 0 {
		t.Errorf("result %+v", res)
	}
	if w.srv.Remaining() != 1 {
		t.Errorf("a turn was consumed")
	}
}

// Cancelling the run from inside an approver, a tool or while the model
// answers ends the run promptly with the context's error; nothing runs after.
// (Calls run one after another here, Parallel 1: with calls at once, the
// calls of the reply that started before the cancel still finish.)
func TestCancelledMidRun(t *testing.T) {
	t.Run("approver", func(t *testing.T) {
		w := newWorld(t,
			calls(call("w1", refundTool, refundArgs), call("r1", readTool, readArgs)),
			fakemodel.Turn{Text: "never"},
		)
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		loop := w.loop(agentloop.Options{Parallel: 1, Approver: host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
			cancel()
			return host.Decision{Approved: true, Approver: "ann"}, nil
		})})
		start := time.Now()
		res, err := loop.Run(ctx, user1, "refund")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
		if res == nil || res.Status == agentloop.StatusCompleted {
			t.Errorf("result %+v", res)
		}
		if w.svc.SideEffects() != 0 || w.svc.Calls() != 0 {
			t.Errorf("ran after the cancel: %d side effects, %d calls", w.svc.SideEffects(), w.svc.Calls())
		}
		if len(w.srv.Requests()) != 1 {
			t.Errorf("%d requests", len(w.srv.Requests()))
		}
	})
	t.Run("tool", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		svc := orders.NewService()
		canceller := toolset.Read("cancel_run", "Cancels the run.", func(context.Context, *guard.Invocation, struct{}) (string, error) {
			cancel()
			return "cancelled", nil
		}, nil)

		base := orders.Tools(svc)
		tools, err := base.With(canceller)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(t,
			calls(call("c1", "cancel_run", `{}`), call("r1", readTool, readArgs), call("c2", "cancel_run", `{}`)),
			fakemodel.Turn{Text: "never"},
		)
		loop := agentloop.New(model(w.client), tools, agentloop.Options{Store: w.store(), Parallel: 1})
		start := time.Now()
		res, err := loop.Run(ctx, user1, "cancel")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
		if svc.Calls() != 0 {
			t.Errorf("a call ran after the cancel")
		}
		if res == nil || kinds(res.Transcript) != "user,call,result" {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("model", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		w := newWorld(t,
			calls(call("r1", readTool, readArgs)),
			fakemodel.Turn{Respond: func(fakemodel.Request) *fakemodel.Turn {
				cancel()
				time.Sleep(100 * time.Millisecond)
				return &fakemodel.Turn{Text: "too late"}
			}},
			fakemodel.Turn{Text: "never"},
		)
		res, err := w.loop().Run(ctx, user1, "ORDER-7?")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if res == nil || res.Turns != 1 || res.Status == agentloop.StatusCompleted {
			t.Errorf("result %+v", res)
		}
		if w.srv.Remaining() != 1 {
			t.Errorf("the cancelled request was retried: %d turns left", w.srv.Remaining())
		}
	})
	t.Run("resume", func(t *testing.T) {
		w := newWorld(t)
		loop := w.loop()
		res := pause(t, w, loop)
		tok, err := loop.Grant(res.Pending[0], "ann")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := loop.Resume(ctx, user1, res.State, agentloop.Approval{CallID: "w1", Grant: tok}); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if w.svc.SideEffects() != 0 {
			t.Errorf("the write ran under a cancelled context")
		}
		// The state is still good for a later resume.
		done, err := loop.Resume(testCtx(t), user1, res.State, agentloop.Approval{CallID: "w1", Grant: tok})
		if err != nil || done.Status != agentloop.StatusCompleted || w.svc.SideEffects() != 1 {
			t.Fatalf("resume after the cancel: %v, %v, %d side effects", done, err, w.svc.SideEffects())
		}
	})
}
