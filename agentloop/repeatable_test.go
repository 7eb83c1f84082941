package agentloop_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type noteIn struct {
	Text string `json:"text" jsonschema:"description=What to say."`
}

// A Repeatable write's identical repeats are meant: each call of the run
// is its own operation (named by its call id), while an ordinary write
// repeated in the run is one operation.
func TestRepeatableWriteRunsEachCall(t *testing.T) {
	w := newWorld(t,
		calls(call("n1", "nudge", `{"text":"hi"}`), call("n2", "nudge", `{"text":"hi"}`),
			call("p1", "post", `{"text":"hi"}`), call("p2", "post", `{"text":"hi"}`)),
		calls(call("n3", "nudge", `{"text":"hi"}`), call("p3", "post", `{"text":"hi"}`)),
		fakemodel.Turn{Text: "done"},
	)
	var nudges, posts atomic.Int32
	nudge := toolset.Write("nudge", "Nudge the customer; each call nudges again.",
		func(context.Context, *guard.Invocation, noteIn) (int32, error) { return nudges.Add(1), nil },
		&toolset.Options[noteIn, int32]{Repeatable: true})
	post := toolset.Write("post", "Post a note once.",
		func(context.Context, *guard.Invocation, noteIn) (int32, error) { return posts.Add(1), nil }, nil)
	l := agentloop.New(model(w.client), toolset.MustNew(nudge, post), agentloop.Options{Store: w.store()})
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Run(testCtx(t), user1, "nudge and post")
	if err != nil || res.Status != agentloop.StatusCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	if n, p := nudges.Load(), posts.Load(); n != 3 || p != 1 {
		t.Fatalf("%d nudges and %d posts, want 3 and 1", n, p)
	}
	var deliveries []string
	for _, req := range w.srv.Requests()[1:] {
		for _, o := range outputsOf(t, req) {
			deliveries = append(deliveries, o.CallID+":"+string(o.Result.Delivery))
		}
	}
	want := "[n1:fresh n2:fresh p1:fresh p2:local_replay n3:fresh p3:local_replay]"
	if got := fmt.Sprint(deliveries); got != want {
		t.Fatalf("deliveries %s, want %s", got, want)
	}
}
