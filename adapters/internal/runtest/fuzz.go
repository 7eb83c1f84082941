package runtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/provider"
)

// BodyServer is an API that answers every request with body, as
// server-sent events when sse is set and as JSON otherwise: what a fuzz
// target serves the real SDK, so that the adapter reads bytes no one
// checked. It is closed when tb's test ends.
func BodyServer(tb testing.TB, body []byte, sse bool) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(body)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// Untrusted runs p for a few turns, streamed or not, over replies no one
// checked (BodyServer), and checks what the host sees: no panic (the
// fuzzer reports one), a run that ends once with a status or an error,
// and every tool result the model would get a tool-model-result-v2
// object with a code.
func Untrusted(t *testing.T, p provider.Provider, streamed bool) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			buf := make([]byte, 1<<20)
			panic("runtest: the run did not end within 30 s, its context's 10 s included:\n" + string(buf[:runtime.Stack(buf, true)]))
		}
	}()
	defer close(done)
	loop := agentloop.New(p, orders.NoopTools(), agentloop.Options{MaxTurns: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := once
	if streamed {
		run = stream
	}
	r := run(ctx, loop, "hi")
	if r.Ends > 1 || r.Ends == 0 && r.Err == nil {
		t.Fatalf("%d ends and error %v: want one end, or an error", r.Ends, r.Err)
	}
	if r.End != nil && r.End.Status == "" {
		t.Fatalf("the run ended with no status (error %v): %+v", r.Err, r.End)
	}
	for _, ev := range r.Of(agentloop.EventResult) {
		var res guard.Result
		if err := json.Unmarshal(ev.Result, &res); err != nil {
			t.Fatalf("the model would get %q for call %s: not a model result: %v", ev.Result, ev.CallID, err)
		}
	}
}
