package replay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// declared is a recorded tool, offered to the model and never run.
type declared struct {
	toolset.Declared
	name   string
	schema *toolset.Schema
}

func (d declared) Name() string            { return d.name }
func (d declared) Schema() *toolset.Schema { return d.schema }
func (d declared) Spec() *guard.ToolSpec {
	s := *d.Declared.Spec()
	s.Name = d.name
	return &s
}

func noop(context.Context, *guard.Invocation, struct{}) (string, error) { return "", nil }

// Tools returns the recording's tools as the loop offers them: each named
// as recorded, with its recorded parameters schema (compiled, not strict),
// never run.
func Tools(t testing.TB, rec *Recording) []toolset.Declared {
	t.Helper()
	out := make([]toolset.Declared, 0, len(rec.Tools))
	for _, tool := range rec.Tools {
		params := tool.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		s, err := toolset.CompileSchema(params)
		if err != nil {
			t.Fatalf("tool %s: %v", tool.Name, err)
		}
		out = append(out, declared{Declared: toolset.Read("recorded", "", noop, nil), name: tool.Name, schema: s})
	}
	return out
}

// Driver says how to replay one API's recordings through its adapter.
type Driver struct {
	// Results returns the tool results a recorded request sends back, in
	// order; the replay answers the calls with them (a stand-in where
	// there are fewer, or no request was recorded).
	Results func(recorded map[string]any) []string
	// Check compares request i (i ≥ 1) that the adapter sent, after reply
	// prev, with the recorded request i (nil where none was recorded).
	Check func(t *testing.T, i int, sent, recorded map[string]any, prev *provider.Reply)
	// Usage, if set, returns the input and output tokens a recorded
	// response reports, which each reply must carry.
	Usage func(t *testing.T, it Interaction) (in, out int64)
}

// Drive plays rec through p, whose client talks to srv: one Turn per
// recorded response, the first on a user message, each next one on the
// conversation so far (the reply's Items, or its Chain, as package
// agentloop keeps it) and OutputItems answering the reply's calls. It
// checks each reply's id, calls (ids, names, arguments), text (streamed
// too, when the recording streams), usage (with d.Usage) and ending
// against the recording,
// and hands each request after the first to d.Check. It returns the
// replies.
func Drive(t *testing.T, rec *Recording, srv *Server, p provider.Provider, d Driver) []*provider.Reply {
	t.Helper()
	tools := Tools(t, rec)
	items := []json.RawMessage{p.UserItem("replay")}
	chain := ""
	var replies []*provider.Reply
	for i, want := range rec.Expect {
		if i > 0 {
			prev := replies[i-1]
			var recorded []string
			if r := rec.Request(i); r != nil && d.Results != nil {
				recorded = d.Results(r)
			}
			outs := make([]provider.Output, len(prev.Calls))
			for j, c := range prev.Calls {
				outs[j] = provider.Output{CallID: c.ID, Kind: c.Kind, Result: `{"recorded":false}`, OK: true}
				if j < len(recorded) {
					outs[j].Result = recorded[j]
				}
			}
			items = append(items, p.OutputItems(outs)...)
		}
		req := provider.Request{Tools: tools, Items: items, Chain: chain}
		var streamed strings.Builder
		if rec.Stream {
			req.Text = func(delta string) { streamed.WriteString(delta) }
		}
		rep, err := p.Turn(context.Background(), req)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		replies = append(replies, rep)
		if i > 0 && d.Check != nil {
			d.Check(t, i, srv.Body(t, i), rec.Request(i), replies[i-1])
		}
		if d.Usage != nil {
			if in, out := d.Usage(t, rec.Interactions[i]); rep.InputTokens != in || rep.OutputTokens != out {
				t.Errorf("turn %d: usage %d in %d out, the API said %d and %d", i, rep.InputTokens, rep.OutputTokens, in, out)
			}
		}
		if want.ResponseID != "" && rep.ID != want.ResponseID {
			t.Errorf("turn %d: reply id %q, want %q", i, rep.ID, want.ResponseID)
		}
		checkCalls(t, i, rep.Calls, want.Calls)
		if rep.Text != want.Text {
			t.Errorf("turn %d: text %q, want %q", i, rep.Text, want.Text)
		}
		if rec.Stream && streamed.String() != want.Text {
			t.Errorf("turn %d: streamed %q, want %q", i, streamed.String(), want.Text)
		}
		last := i == len(rec.Expect)-1
		if !last {
			if rep.End != provider.EndNormal {
				t.Fatalf("turn %d ended %s (%s) before the recording did", i, rep.End, rep.Reason)
			}
			if rep.Chain != "" {
				chain, items = rep.Chain, nil
			} else {
				chain = ""
				items = append(items, rep.Items...)
			}
			continue
		}
		checkEnd(t, rep, rec.ExpectEnd)
	}
	if n := srv.Remaining(); n != 0 {
		t.Errorf("%d recorded responses were not asked for", n)
	}
	return replies
}

func checkCalls(t *testing.T, turn int, got []provider.ToolCall, want []Call) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("turn %d: %d calls, want %d: %+v", turn, len(got), len(want), got)
		return
	}
	for j, c := range want {
		g := got[j]
		if g.ID != c.ID || g.Name != c.Name || !SameJSON(g.Arguments, c.Arguments) {
			t.Errorf("turn %d call %d: %s %s %s, want %s %s %s", turn, j, g.ID, g.Name, g.Arguments, c.ID, c.Name, c.Arguments)
		}
	}
}

// checkEnd compares how the last reply ended with the recording's
// expect_end: completed (or exhausted, when it still has calls),
// incomplete, refused or failed, with the reason; a failed one carries a
// provider.APIError whose Code is the reason.
func checkEnd(t *testing.T, rep *provider.Reply, want End) {
	t.Helper()
	status := string(rep.End)
	if rep.End == provider.EndNormal {
		status = "completed"
		if len(rep.Calls) > 0 {
			status = "exhausted"
		}
	}
	if status != want.Status || rep.Reason != want.Reason {
		t.Errorf("ending %s (%s), want %s (%s)", status, rep.Reason, want.Status, want.Reason)
	}
	var apiErr *provider.APIError
	if failed := rep.End == provider.EndFailed; failed != errors.As(rep.Err, &apiErr) || failed && apiErr.Code != rep.Reason {
		t.Errorf("ending %s carries error %v, want a provider.APIError with code %q exactly when failed", status, rep.Err, rep.Reason)
	}
}

// SameJSON reports whether a and b are the same JSON value (an object's
// members in any order, any white space), or, when either is not JSON,
// the same text.
func SameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
