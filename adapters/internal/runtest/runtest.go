// Package runtest runs package agentloop over an adapter's Model in the
// adapters' tests, streamed, with the order tools (get_order and
// create_refund_draft, doing nothing downstream), and checks how the run
// ended.
package runtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/provider"
)

// Principal is the principal the runs act for.
var Principal = guard.Principal{TenantID: "tenant-a", SubjectID: "user-1", Roles: []string{"support"}}

// Run is what a streamed run yielded.
type Run struct {
	// Events are the events, EventText deltas included, in order.
	Events []agentloop.Event
	// End is the EventEnd's result, nil when none came.
	End *agentloop.RunResult
	// Ends counts the EventEnd events.
	Ends int
	// Err is the error yielded last, nil for none.
	Err error
}

// Stream runs p on input with agentloop.Stream and collects what it
// yields.
func Stream(t testing.TB, p provider.Provider, input string) *Run {
	t.Helper()
	return stream(context.Background(), agentloop.New(p, orders.NoopTools(), agentloop.Options{}), input)
}

// stream runs loop on input with agentloop.Stream and collects what it
// yields.
func stream(ctx context.Context, loop *agentloop.Loop, input string) *Run {
	r := &Run{}
	for ev, err := range loop.Stream(ctx, Principal, input) {
		if err != nil {
			r.Err = err
			continue
		}
		r.Events = append(r.Events, ev)
		if ev.Kind == agentloop.EventEnd {
			r.End, r.Ends = ev.Run, r.Ends+1
		}
	}
	return r
}

// Once runs p on input with agentloop.Run, a request at a time without
// streaming, and returns it as Stream would have yielded it: the
// transcript's events, then an EventEnd.
func Once(t testing.TB, p provider.Provider, input string) *Run {
	t.Helper()
	return once(context.Background(), agentloop.New(p, orders.NoopTools(), agentloop.Options{}), input)
}

// once runs loop on input with agentloop.Run and returns it as stream
// would have yielded it.
func once(ctx context.Context, loop *agentloop.Loop, input string) *Run {
	res, err := loop.Run(ctx, Principal, input)
	r := &Run{Err: err}
	if res != nil {
		r.Events = append(r.Events, res.Transcript...)
		if res.Status != "" {
			r.Events = append(r.Events, agentloop.Event{Kind: agentloop.EventEnd, Run: res})
			r.End, r.Ends = res, 1
		}
	}
	return r
}

// Text returns the streamed text: the EventText deltas joined.
func (r *Run) Text() string {
	var b strings.Builder
	for _, ev := range r.Events {
		if ev.Kind == agentloop.EventText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// Of returns the events of one kind, in order.
func (r *Run) Of(kind agentloop.EventKind) []agentloop.Event {
	var out []agentloop.Event
	for _, ev := range r.Events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// Ended checks that the run yielded one EventEnd, last but for the
// error, with status and reason, and no error.
func (r *Run) Ended(t testing.TB, status agentloop.RunStatus, reason string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("run failed: %v", r.Err)
	}
	r.end(t, status, reason)
}

func (r *Run) end(t testing.TB, status agentloop.RunStatus, reason string) {
	t.Helper()
	if r.Ends != 1 || r.End == nil {
		t.Fatalf("%d EventEnd events, want 1: %v", r.Ends, r.Events)
	}
	if last := r.Events[len(r.Events)-1]; last.Kind != agentloop.EventEnd {
		t.Errorf("the last event is %s, want end", last.Kind)
	}
	if r.End.Status != status || r.End.Reason != reason {
		t.Errorf("run ended %s (%q), want %s (%q)", r.End.Status, r.End.Reason, status, reason)
	}
}

// Failed checks that the run ended as an API error reported inside the
// stream ends it: StatusFailed with the error's code as the reason, one
// EventEnd, and then the error, a provider.APIError with that code and
// status 200; it returns the error.
func (r *Run) Failed(t testing.TB, code string) *provider.APIError {
	t.Helper()
	r.end(t, agentloop.StatusFailed, code)
	var apiErr *provider.APIError
	if !errors.As(r.Err, &apiErr) {
		t.Fatalf("the run's error is %v, want a provider.APIError", r.Err)
	}
	if apiErr.Code != code || apiErr.StatusCode != 200 {
		t.Errorf("APIError code %q status %d, want %q and 200", apiErr.Code, apiErr.StatusCode, code)
	}
	if provider.ErrorType(r.Err) != code {
		t.Errorf("telemetry names the error %q, want %q", provider.ErrorType(r.Err), code)
	}
	return apiErr
}
