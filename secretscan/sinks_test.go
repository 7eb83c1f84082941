package secretscan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	mcp "github.com/modelcontextprotocol/go-sdk/mcp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/genai"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	tgchat "github.com/toolguard/toolguard/adapters/chat"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/frameworktest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/internal/secretcorpus"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/secretscan"
	"github.com/toolguard/toolguard/toolset"
)

// The sink test's tools. probe (a read) returns the case's text where the
// case says: a string of its output, a key of its output, or its typed
// error's message. probe_write (a write) loses its answer (OUTCOME_UNKNOWN),
// and its receipt returns the text as probe would, for a status query.
// file_note (a write a human approves) takes the text as an argument the
// audit record and the inbox show.
const (
	probeTool  = "probe"
	writeTool  = "probe_write"
	noteTool   = "file_note"
	sinkTenant = "tenant-sinks"
)

type probeIn struct {
	ID int `json:"id"`
}

// probeArgs are the arguments the scripted models call probe with (not
// empty: Gemini's fake signs a call's arguments, and an empty object comes
// back from the SDK as none).
const probeArgs = `{"id":1}`

type noteIn struct {
	Note string   `json:"note"`
	Tags []string `json:"tags"`
}

var (
	sinkUser = guard.Principal{TenantID: sinkTenant, SubjectID: "user-1"}
	sinkLead = guard.Principal{TenantID: sinkTenant, SubjectID: "lead-1", Roles: []string{approvals.DefaultRole}}
)

// output is what probe returns for the case: its output, or its error.
func output(c secretcorpus.Case, receipt bool) (any, error) {
	switch {
	case c.Where == secretcorpus.AsMapKey:
		return map[string]any{"data": map[string]any{c.Text: 7}}, nil
	case c.Where == secretcorpus.AsError && !receipt:
		return nil, guard.NewError(guard.CodeNotFound, c.Text)
	}
	return map[string]any{"data": map[string]any{"note": c.Text, "id": 7}}, nil
}

// sinkTools are the three tools, returning what *cur says.
func sinkTools(cur *secretcorpus.Case) *toolset.Set {
	probe := toolset.Read(probeTool, "Read the probe.", func(context.Context, *guard.Invocation, probeIn) (any, error) {
		return output(*cur, false)
	}, nil)
	write := toolset.Write(writeTool, "Write the probe.", func(context.Context, *guard.Invocation, probeIn) (any, error) {
		return nil, guard.UnknownOutcome(errors.New("the answer was lost"))
	}, &toolset.Options[probeIn, any]{Receipt: func(context.Context, *guard.Invocation) (any, bool, error) {
		out, err := output(*cur, true)
		return out, true, err
	}})
	note := toolset.Write(noteTool, "File a note.", func(context.Context, *guard.Invocation, noteIn) (string, error) {
		return "filed", nil
	}, &toolset.Options[noteIn, string]{NeedsApproval: true, LoggedArguments: []string{"note", "tags"}})
	return toolset.MustNew(probe, write, note)
}

// fakeModel is one provider's fake server, whose model calls a tool and
// then answers "done", and the client the loop talks to it with.
type fakeModel struct {
	name  string
	model provider.Provider
	// script enqueues the turns of one run: the call, then "done" unless
	// the run pauses at the call.
	script func(tool, args string, pauses bool)
	// last is the body of the last request the server got.
	last func() string
}

func fakeModels(t *testing.T) []*fakeModel {
	t.Helper()
	responses := fakemodel.NewOpenAI()
	chat := fakemodel.NewChat()
	anth := fakemodel.NewAnthropic()
	gem := fakemodel.NewGemini()
	for _, c := range []interface{ Close() }{responses, chat, anth, gem} {
		t.Cleanup(c.Close)
	}
	gclient, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: gem.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return []*fakeModel{
		{name: "openai-responses",
			model: tgopenai.NewModel(oai.NewClient(option.WithBaseURL(responses.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0)),
				tgopenai.ModelOptions{Name: "m"}),
			script: func(tool, args string, pauses bool) {
				responses.Enqueue(fakemodel.Turn{Calls: []fakemodel.Call{{Name: tool, Arguments: args}}})
				if !pauses {
					responses.Enqueue(fakemodel.Turn{Text: "done"})
				}
			},
			last: func() string { r := responses.Requests(); return string(r[len(r)-1].Body) }},
		{name: "openai-chat",
			model: tgchat.NewModel(oai.NewClient(option.WithBaseURL(chat.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0)),
				tgchat.ModelOptions{Name: "m"}),
			script: func(tool, args string, pauses bool) {
				chat.Enqueue(fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "call-1", Name: tool, Arguments: args}}})
				if !pauses {
					chat.Enqueue(fakemodel.Turn{Text: "done"})
				}
			},
			last: func() string { r := chat.Requests(); return string(r[len(r)-1].Body) }},
		{name: "anthropic",
			model: tganthropic.NewModel(sdk.NewClient(aoption.WithBaseURL(anth.BaseURL()), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0)),
				tganthropic.ModelOptions{Name: "m"}),
			script: func(tool, args string, pauses bool) {
				anth.Enqueue(fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "toolu_1", Name: tool, Arguments: args}}})
				if !pauses {
					anth.Enqueue(fakemodel.Turn{Text: "done"})
				}
			},
			last: func() string { r := anth.Requests(); return string(r[len(r)-1].Body) }},
		{name: "gemini",
			model: tggemini.NewModel(gclient, tggemini.ModelOptions{Name: "m"}),
			script: func(tool, args string, pauses bool) {
				gem.Enqueue(fakemodel.Turn{Calls: []fakemodel.Call{{CallID: "g-1", Name: tool, Arguments: args}}})
				if !pauses {
					gem.Enqueue(fakemodel.Turn{Text: "done"})
				}
			},
			last: func() string { r := gem.Requests(); return string(r[len(r)-1].Body) }},
	}
}

// sinkWorld is one case's guard, store, observers and queue, with keys of
// their own in the shared Redis.
type sinkWorld struct {
	prefix  string
	opts    guard.Options
	store   *idem.Store
	guard   *guard.Guard
	queue   *approvals.Queue
	spans   frameworktest.SpanText
	logs    bytes.Buffer
	metrics *sdkmetric.ManualReader
}

func newSinkWorld(t *testing.T, rdb redis.UniversalClient, d guard.Detector, tools *toolset.Set, prefix string) *sinkWorld {
	t.Helper()
	w := &sinkWorld{prefix: prefix, metrics: sdkmetric.NewManualReader()}
	var err error
	if w.store, err = idem.New(rdb, idem.Options{Prefix: w.prefix + "idem:"}); err != nil {
		t.Fatal(err)
	}
	if err := (observe.Options{TracerProvider: &w.spans, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.metrics)),
		Logger: slog.New(slog.NewJSONHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Tools: tools}).Apply(&w.opts); err != nil {
		t.Fatal(err)
	}
	w.opts.SecretKey = bytes.Repeat([]byte("k"), 32)
	w.opts.Detector = d
	w.guard = guard.New(tools, w.store, w.opts)
	if w.queue, err = approvals.NewQueue(rdb, approvals.Options{Prefix: w.prefix + "apr:", Tools: tools,
		SecretKey: w.opts.SecretKey, Detector: d}); err != nil {
		t.Fatal(err)
	}
	return w
}

// sink names what a sink received, for the leak table.
type sink struct {
	name string
	text string
}

// cell is one (shape, context, sink) of the leak table.
type cell struct {
	shape   string
	context secretcorpus.Context
	sink    string
}

// TestCorpusEverySink puts each case of the corpus (internal/secretcorpus:
// 29 secret shapes × the 12 contexts) where its context says (a
// string of a tool's output, a key of it, its typed error's message), and
// in a receipt and in an argument the audit record and the inbox show,
// and drives it through every place a guard writes to with the real
// detector: each provider's next request body (OpenAI Responses and Chat
// Completions, Anthropic, Gemini: their fake servers record what the real
// SDK clients sent), the answer an MCP client (the go-sdk's) gets, a
// status query's answer from the receipt, the audit records, every key
// and value of a real Redis, the spans, the log lines, the metrics, and
// the approvals inbox's pages and JSON API. No sink may hold 12
// characters in a row of any form of the secret (Case.Leak): the table of
// leaks by shape, context and sink must be all zeros.
//
// Redis is the real server TOOLGUARD_REDIS_URL names (CI starts one); without
// it, miniredis, and the test says so.
func TestCorpusEverySink(t *testing.T) {
	var rdb redis.UniversalClient
	if os.Getenv(redistest.EnvURL) != "" {
		rdb = redistest.Standalone(t)
	} else {
		t.Logf("%s is not set: Redis is miniredis here, a real server in CI (scripts/redis-up.sh starts one)", redistest.EnvURL)
		_, rdb = redistest.Mini(t)
	}
	d := newDetector(t, secretscan.Options{})
	cases := secretcorpus.Cases()
	run := redistest.Prefix(t)
	var mu sync.Mutex
	leaks := map[cell]int{}
	// The cases in as many workers as there are CPUs, each with fake
	// servers and tools of its own (a fake answers its turns in order).
	workers := runtime.GOMAXPROCS(0)
	t.Run("cases", func(t *testing.T) {
		for wk := range workers {
			t.Run(fmt.Sprint("worker-", wk), func(t *testing.T) {
				t.Parallel()
				var cur secretcorpus.Case
				tools := sinkTools(&cur)
				models := fakeModels(t)
				for i := wk; i < len(cases); i += workers {
					cur = cases[i]
					sinks := runCase(t, rdb, d, tools, models, fmt.Sprintf("%s%d:", run, i), cur)
					mu.Lock()
					for _, s := range sinks {
						leaks[cell{cur.Shape, cur.Context, s.name}] += 0
						if p, ok := cur.Leak(s.text); ok {
							leaks[cell{cur.Shape, cur.Context, s.name}]++
							t.Errorf("%s/%s: %s holds %q", cur.Shape, cur.Context, s.name, p)
						}
					}
					mu.Unlock()
				}
			})
		}
	})
	reportLeaks(t, leaks, len(cases))
}

// runCase drives one case through every sink and returns what each got.
func runCase(t *testing.T, rdb redis.UniversalClient, d guard.Detector, tools *toolset.Set, models []*fakeModel, prefix string, c secretcorpus.Case) []sink {
	t.Helper()
	ctx := t.Context()
	w := newSinkWorld(t, rdb, d, tools, prefix)
	var sinks []sink

	// The output (or the error) through each provider.
	for _, m := range models {
		m.script(probeTool, probeArgs, false)
		l := agentloop.New(m.model, tools, agentloop.Options{Store: w.store, Guard: w.opts})
		res, err := l.Run(ctx, sinkUser, "read the probe")
		if err != nil || res.Status != agentloop.StatusCompleted {
			t.Fatalf("%s/%s on %s: %v %v", c.Shape, c.Context, m.name, res, err)
		}
		sinks = append(sinks, sink{m.name, m.last()}, sink{m.name + " transcript", res.Transcript.String()})
	}

	// The same over MCP.
	srv, err := tgmcp.NewServer(w.guard, tools, tgmcp.Options{Principal: &sinkUser})
	if err != nil {
		t.Fatal(err)
	}
	sinks = append(sinks, sink{"mcp", mcpCall(t, srv, probeTool)})

	// A receipt, through a status query.
	call := guard.Call{Principal: sinkUser, Proposal: guard.Proposal{Name: writeTool, Arguments: []byte(probeArgs)},
		Context: guard.ExecutionContext{CallID: "w-1", IdempotencyKey: "k-1"}}
	if r, err := w.guard.Dispatch(ctx, call); err != nil || r.Code != guard.CodeOutcomeUnknown {
		t.Fatalf("%s/%s: write %v %v", c.Shape, c.Context, r, err)
	}
	st, err := w.guard.QueryStatus(ctx, guard.StatusCall{Principal: sinkUser, OperationID: "w-1", Tool: writeTool,
		Context: guard.ExecutionContext{CallID: "s-1", IdempotencyKey: "k-1"}})
	if err != nil || st.Code != guard.CodeOK {
		t.Fatalf("%s/%s: status %v %v", c.Shape, c.Context, st, err)
	}
	sinks = append(sinks, sink{"status answer", st.String()})

	// An argument the model wrote, which the audit record and the inbox
	// show: the run pauses for approval and is parked.
	args, _ := json.Marshal(noteIn{Note: c.Text, Tags: []string{c.Text}})
	models[0].script(noteTool, string(args), true)
	l := agentloop.New(models[0].model, tools, agentloop.Options{Store: w.store, Guard: w.opts})
	res, err := l.Run(ctx, sinkUser, "file the note")
	if err != nil || res.Status != agentloop.StatusPaused {
		t.Fatalf("%s/%s: note run %v %v", c.Shape, c.Context, res, err)
	}
	if _, err := w.queue.Park(ctx, res); err != nil {
		t.Fatal(err)
	}
	sinks = append(sinks, inboxSinks(t, w.queue)...)

	recs, _, err := w.store.Audit(ctx, sinkTenant, 0, 1000)
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	audited, _ := json.Marshal(recs)
	spans, _ := w.spans.Text()
	var rm metricdata.ResourceMetrics
	if err := w.metrics.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	metrics, _ := json.Marshal(rm)
	sinks = append(sinks, sink{"audit", string(audited)}, sink{"redis", redistest.Contents(t, rdb, w.prefix+"*")},
		sink{"spans", spans}, sink{"logs", w.logs.String()}, sink{"metrics", fmt.Sprintf("%s %+v", metrics, rm)})

	for _, s := range sinks {
		if s.text == "" && s.name != "logs" {
			t.Fatalf("%s/%s: the sink %s got nothing", c.Shape, c.Context, s.name)
		}
		// Each sink that carries the text carries it withheld: the text
		// reached it (a sink that never got it would be no test).
		if carries(s.name) && !strings.Contains(s.text, "[secret withheld; hmac-sha256:") {
			t.Errorf("%s/%s: %s holds no placeholder", c.Shape, c.Context, s.name)
		}
	}
	return sinks
}

// carries reports whether a sink gets the text (withheld): spans, logs and
// metrics never carry an output, a message or arguments at all.
func carries(sink string) bool {
	return sink != "spans" && sink != "logs" && sink != "metrics"
}

// mcpCall calls tool over MCP with the go-sdk client, in memory, and
// returns the whole answer as JSON.
func mcpCall(t *testing.T, srv *tgmcp.Server, tool string) string {
	t.Helper()
	ctx := t.Context()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sinks", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": 1}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// inboxSinks are the inbox's list and request pages and its JSON API, as
// an approver of the tenant gets them.
func inboxSinks(t *testing.T, q *approvals.Queue) []sink {
	t.Helper()
	in, err := approvals.NewInbox(approvals.InboxOptions{Queue: q,
		Authenticate: func(*http.Request) (guard.Principal, error) { return sinkLead, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, b)
		}
		return string(b)
	}
	var list struct{ Requests []approvals.Request }
	apiList := get("/api/requests")
	if err := json.Unmarshal([]byte(apiList), &list); err != nil || len(list.Requests) != 1 {
		t.Fatalf("the inbox lists %s (%v)", apiList, err)
	}
	id := list.Requests[0].ID
	return []sink{{"inbox html", get("/") + get("/r/"+id)}, {"inbox json", apiList + get("/api/requests/"+id)}}
}

// reportLeaks logs the leak table: the leaks of each sink, and of each
// shape × context over all sinks; the test has failed already where a
// cell is not zero.
func reportLeaks(t *testing.T, leaks map[cell]int, cases int) {
	t.Helper()
	bySink := map[string]int{}
	byCase := map[string]map[secretcorpus.Context]int{}
	for c, n := range leaks {
		bySink[c.sink] += n
		if byCase[c.shape] == nil {
			byCase[c.shape] = map[secretcorpus.Context]int{}
		}
		byCase[c.shape][c.context] += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaks by sink (%d cases, %d cells):\n", cases, len(leaks))
	sinks := slices.Sorted(func(yield func(string) bool) {
		for s := range bySink {
			if !yield(s) {
				return
			}
		}
	})
	for _, s := range sinks {
		fmt.Fprintf(&b, "  %-28s %d\n", s, bySink[s])
	}
	fmt.Fprintf(&b, "leaks by shape (rows) and context (columns), all sinks:\n%-22s", "")
	for _, ctx := range secretcorpus.Contexts() {
		fmt.Fprintf(&b, " %5.5s", ctx)
	}
	b.WriteByte('\n')
	for _, shape := range secretcorpus.Shapes() {
		fmt.Fprintf(&b, "%-22.22s", shape)
		for _, ctx := range secretcorpus.Contexts() {
			fmt.Fprintf(&b, " %5d", byCase[shape][ctx])
		}
		b.WriteByte('\n')
	}
	t.Log(b.String())
}

// TestLookAlikesEverySink: each of the corpus's look-alikes (ids, hashes,
// UUIDs, timestamps, IMEIs, tracking numbers, base64 of prose…) is a tool's
// output of its own, as a string and as a key, and reaches the model as it
// is: at most 0.1 % of them are redacted in the model result, and in what
// the OpenAI Responses client sent the provider next (each call's function
// call output, decoded).
func TestLookAlikesEverySink(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	la := secretcorpus.LookAlikes()
	probe := toolset.Read(probeTool, "Read the probe.", func(_ context.Context, _ *guard.Invocation, in probeIn) (any, error) {
		text := la[in.ID].Text
		return map[string]any{"data": map[string]any{"note": text, text: 1}}, nil
	}, nil)
	tools := toolset.MustNew(probe)
	opts := guard.Options{Detector: d, SecretKey: []byte("k")}
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), opts)
	kept := func(i int, data []byte) bool {
		var got struct{ Data map[string]any }
		text := la[i].Text
		return json.Unmarshal(data, &got) == nil && got.Data["note"] == text && got.Data[text] != nil
	}
	inResult, inRequest := 0, 0
	for i, l := range la {
		res, err := g.Dispatch(t.Context(), guard.Call{Principal: sinkUser, Proposal: guard.Proposal{Name: probeTool, Arguments: fmt.Appendf(nil, `{"id":%d}`, i)},
			Context: guard.ExecutionContext{CallID: fmt.Sprint("la-", i)}})
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("%v %v", res, err)
		}
		if !kept(i, res.Data) {
			inResult++
			t.Logf("redacted in the model result: %s %q → %s", l.Kind, l.Text, res.Data)
		}
	}
	// Through the provider: runs of 100 calls, each call one look-alike's
	// output, all answered in the run's next request.
	for from := 0; from < len(la); from += 100 {
		var calls []fakemodel.Call
		for i := from; i < min(from+100, len(la)); i++ {
			calls = append(calls, fakemodel.Call{CallID: fmt.Sprint("call-la-", i), Name: probeTool, Arguments: fmt.Sprintf(`{"id":%d}`, i)})
		}
		srv := fakemodel.NewOpenAI(fakemodel.Turn{Calls: calls}, fakemodel.Turn{Text: "done"})
		model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0)), tgopenai.ModelOptions{})
		run, err := agentloop.New(model, tools, agentloop.Options{Guard: opts}).Run(t.Context(), sinkUser, "read the probes")
		if err != nil || run.Status != agentloop.StatusCompleted {
			t.Fatalf("%v %v", run, err)
		}
		results, err := srv.ModelResults()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < min(from+100, len(la)); i++ {
			if r := results[fmt.Sprint("call-la-", i)]; r.Code != guard.CodeOK || !kept(i, r.Data) {
				inRequest++
				t.Logf("redacted in the provider's request: %s %q → %s %s", la[i].Kind, la[i].Text, r.Code, r.Data)
			}
		}
	}
	t.Logf("look-alikes redacted: %d of %d in the model result, %d of %d in the provider's next request", inResult, len(la), inRequest, len(la))
	if inResult*1000 > len(la) || inRequest*1000 > len(la) {
		t.Errorf("more than 0.1 %% of %d look-alikes redacted: %d, %d", len(la), inResult, inRequest)
	}
}
