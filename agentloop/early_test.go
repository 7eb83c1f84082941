package agentloop_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"google.golang.org/genai"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

type earlyNote struct {
	Text string `json:"text"`
}

// heldReply starts the named provider's fake with a reply that calls a
// write (add_note) and then a read (get_order) and stays open until hold
// is closed, then a final message. answered returns the tools whose results
// the second request carries, in its order.
func heldReply(t *testing.T, name string, hold <-chan struct{}) (p provider.Provider, answered func() []string) {
	t.Helper()
	const note, read = `{"text":"asked about ORDER-7"}`, `{"order_ref":"ORDER-7"}`
	tool := map[string]string{"c_note": "add_note", "c_read": readTool}
	switch name {
	case "responses":
		srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "Looking it up", Hold: hold, Calls: []fakemodel.Call{
			{CallID: "c_note", Name: "add_note", Arguments: note}, {CallID: "c_read", Name: readTool, Arguments: read}}},
			fakemodel.Turn{Text: "ORDER-7 is paid."})
		t.Cleanup(srv.Close)
		return model(newClient(srv)), func() (names []string) {
			for _, o := range srv.Requests()[1].Results() {
				names = append(names, tool[o.CallID])
			}
			return names
		}
	case "anthropic":
		srv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "Looking it up", Hold: hold, Calls: []fakemodel.Call{
			{CallID: "c_note", Name: "add_note", Arguments: note}, {CallID: "c_read", Name: readTool, Arguments: read}}},
			fakemodel.Turn{Text: "ORDER-7 is paid."})
		t.Cleanup(srv.Close)
		return tganthropic.NewModel(sdk.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey("test")), tganthropic.ModelOptions{}),
			func() (names []string) {
				for _, r := range srv.Requests()[1].ToolResults() {
					names = append(names, tool[r.ToolUseID])
				}
				return names
			}
	case "gemini":
		srv := fakemodel.NewGemini(fakemodel.Turn{Text: "Looking it up", Hold: hold, Calls: []fakemodel.Call{
			{Name: "add_note", Arguments: note}, {Name: readTool, Arguments: read}}},
			fakemodel.Turn{Text: "ORDER-7 is paid."})
		t.Cleanup(srv.Close)
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
		if err != nil {
			t.Fatal(err)
		}
		return tggemini.NewModel(client, tggemini.ModelOptions{}), func() (names []string) {
			for _, r := range srv.Requests()[1].FunctionResponses() {
				names = append(names, r.Name)
			}
			return names
		}
	}
	t.Fatalf("no provider %s", name)
	return nil, nil
}

// On every provider whose stream says when a call is complete (Responses'
// output_item.done, Anthropic's content_block_stop, Gemini's chunk), a read
// runs while its reply still streams: each fake holds its reply open until
// the read's result is out, so the run ends only if the read ran early. The
// write the reply carries first waits for the reply's end, and the results
// still go back in the reply's order.
func TestEveryStreamReadsEarly(t *testing.T) {
	for _, name := range []string{"responses", "anthropic", "gemini"} {
		t.Run(name, func(t *testing.T) {
			hold := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(hold) }) }
			p, answered := heldReply(t, name, hold)
			t.Cleanup(release) // runs before the fake's Close, so a failed test does not hang it
			var notes atomic.Int32
			tools, err := orders.Tools(orders.NewService()).With(toolset.Write("add_note", "Adds a note.",
				func(context.Context, *guard.Invocation, earlyNote) (string, error) { notes.Add(1); return "noted", nil }, nil))
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu          sync.Mutex
				writeBefore bool
				seen        []agentloop.Event
			)
			loop := agentloop.New(p, tools, agentloop.Options{Store: guard.NewMemStore(guard.MemStoreOptions{}), Observer: func(e agentloop.Event) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, e)
				if e.Kind == agentloop.EventResult && e.Tool == readTool {
					for _, s := range seen {
						writeBefore = writeBefore || s.Tool == "add_note"
					}
					writeBefore = writeBefore || notes.Load() != 0
					release()
				}
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var res *agentloop.RunResult
			for ev, err := range loop.Stream(ctx, user1, "Where is ORDER-7?") {
				if err != nil {
					t.Fatalf("%v (the reply was held open: the read did not run before its end)", err)
				}
				if ev.Kind == agentloop.EventEnd {
					res = ev.Run
				}
			}
			if res == nil || res.Status != agentloop.StatusCompleted || notes.Load() != 1 {
				t.Fatalf("%+v, %d notes", res, notes.Load())
			}
			mu.Lock()
			defer mu.Unlock()
			if writeBefore {
				t.Error("the write was called or ran before its reply ended")
			}
			var kinds []string
			for _, e := range res.Transcript {
				kinds = append(kinds, string(e.Kind)+":"+e.Tool)
			}
			if got := strings.Join(kinds, ","); got != "user:,call:get_order,result:get_order,message:,call:add_note,result:add_note,message:" {
				t.Errorf("transcript %s\n%s", got, res.Transcript)
			}
			if got := answered(); !slices.Equal(got, []string{"add_note", readTool}) {
				t.Errorf("the results went back for %v; want the reply's order, add_note then %s", got, readTool)
			}
		})
	}
}
