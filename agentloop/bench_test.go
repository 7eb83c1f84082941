package agentloop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type sleepIn struct {
	N int `json:"n"`
}

// sleepTools is a read that takes d.
func sleepTools(d time.Duration) *toolset.Set {
	return toolset.MustNew(toolset.Read("lookup", "Looks something up slowly.", func(ctx context.Context, _ *guard.Invocation, in sleepIn) (int, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return in.N, nil
	}, nil))
}

// turn is one run of two model turns against the fake Responses server:
// a reply of n calls of the tool, then a final message.
func turn(b *testing.B, srv *fakemodel.OpenAIServer, loop *agentloop.Loop, n int) {
	var cs []fakemodel.Call
	for i := range n {
		cs = append(cs, fakemodel.Call{Name: "lookup", Arguments: fmt.Sprintf(`{"n":%d}`, i)})
	}
	srv.Enqueue(fakemodel.Turn{Calls: cs}, fakemodel.Turn{Text: "done"})
	res, err := loop.Run(context.Background(), user1, "look them up")
	if err != nil || res.Status != agentloop.StatusCompleted {
		b.Fatalf("%+v %v", res, err)
	}
}

// BenchmarkTurn measures a run whose reply makes N parallel calls of a
// tool that takes L = 100 ms, against the same run with a tool that takes
// no time (the fake provider's own time, the loop's and the guard's), in
// one process one after the other. turn/ideal is the first over L plus the
// second: 1 is a turn as fast as its slowest tool; calls run one after
// another give about N.
func BenchmarkTurn(b *testing.B) {
	const L = 100 * time.Millisecond
	for _, n := range []int{1, 3, 8} {
		for _, parallel := range []int{0, 1} {
			name := fmt.Sprintf("N=%d", n)
			if parallel == 1 {
				name += "/sequential"
			}
			b.Run(name, func(b *testing.B) {
				srv := fakemodel.NewOpenAI()
				defer srv.Close()
				fast := agentloop.New(model(newClient(srv)), sleepTools(0), agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{}), Parallel: parallel})
				slow := agentloop.New(model(newClient(srv)), sleepTools(L), agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{}), Parallel: parallel})
				turn(b, srv, fast, n) // warm the connection
				var base, full time.Duration
				b.ResetTimer()
				for b.Loop() {
					t0 := time.Now()
					turn(b, srv, fast, n)
					t1 := time.Now()
					turn(b, srv, slow, n)
					base += t1.Sub(t0)
					full += time.Since(t1)
				}
				runs := time.Duration(b.N)
				b.ReportMetric(float64(full/runs)/float64(L+base/runs), "turn/ideal")
				b.ReportMetric(float64(full/runs)/1e6, "ms/turn")
				b.ReportMetric(float64(base/runs)/1e6, "ms/overhead")
			})
		}
	}
}

// BenchmarkStreamFirstResult streams a Gemini reply of three reads, one
// call a chunk, 20 ms apart (as a model writes them), and measures when
// the first read's result is out against when the fake server finished
// writing the reply: first/reply below 1 means the read ran while the
// reply still streamed (one after the other it would be above 1).
func BenchmarkStreamFirstResult(b *testing.B) {
	const pace = 20 * time.Millisecond
	srv := fakemodel.NewGemini()
	defer srv.Close()
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "bench", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	loop := agentloop.New(tggemini.NewModel(client, tggemini.ModelOptions{}), sleepTools(0), agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{})})
	var first, end time.Duration
	b.ResetTimer()
	for b.Loop() {
		var cs []fakemodel.Call
		for i := range 3 {
			cs = append(cs, fakemodel.Call{Name: "lookup", Arguments: fmt.Sprintf(`{"n":%d}`, i)})
		}
		srv.Enqueue(fakemodel.Turn{Calls: cs, Pace: pace}, fakemodel.Turn{Text: "done"})
		start := time.Now()
		var firstAt time.Duration
		for ev, err := range loop.Stream(context.Background(), user1, "look them up") {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Kind == agentloop.EventResult && firstAt == 0 {
				firstAt = time.Since(start)
			}
		}
		// The reply ended when the server finished writing it.
		reqs := srv.Requests()
		first += firstAt
		end += reqs[len(reqs)-2].Done.Sub(start)
	}
	runs := time.Duration(b.N)
	b.ReportMetric(float64(first/runs)/1e6, "ms/first-result")
	b.ReportMetric(float64(end/runs)/1e6, "ms/reply")
	b.ReportMetric(float64(first)/float64(end), "first/reply")
}
