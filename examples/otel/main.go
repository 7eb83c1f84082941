// Command otel is an offline example agent run with every tool call traced,
// measured and logged through package observe: OpenTelemetry spans printed
// by the stdout exporter, slog records, and a summary of the metrics.
//
// The model reads an order, drafts a refund (a write that needs approval:
// the first dispatch says APPROVAL_REQUIRED, the host approves and
// dispatches again), the reply of the order service is lost
// (OUTCOME_UNKNOWN), and the model asks the status tool, which settles the
// outcome from the service's receipt. Every dispatch and status query is one
// "execute_tool …" span under the run's "invoke_agent" span.
//
//	go run ./examples/otel            # one JSON line per span
//	go run ./examples/otel -pretty    # indented spans
//
// agentloop cannot take guard interceptors yet, so this example drives the
// Responses API itself: the loop below is the part of agentloop it needs.
// With OPENAI_API_KEY set it talks to the real API; with REDIS_URL set it
// keeps its records in that Redis.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/orders"
	"github.com/toolguard/toolguard/toolset"
)

func main() {
	pretty := flag.Bool("pretty", false, "indent the printed spans")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *pretty); err != nil {
		fmt.Fprintln(os.Stderr, "otel:", err)
		os.Exit(1)
	}
}

const statusTool = agentloop.DefaultStatusTool

// script is the fake model. Before it asks for the draft it makes the order
// service lose its next reply.
func script(svc *orders.Service) []openaitest.Turn {
	return []openaitest.Turn{
		{Calls: []openaitest.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		{Respond: func(openaitest.Request) *openaitest.Turn {
			svc.FailNext(orders.FailAfterCommit) // the draft is created, then the reply is lost
			return &openaitest.Turn{Text: "ORDER-7 arrived damaged; drafting the refund.",
				Calls: []openaitest.Call{{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"damaged"}`}}}
		}},
		{Respond: func(req openaitest.Request) *openaitest.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Recovery() == guard.RecoveryQueryStatus {
					args, _ := json.Marshal(agentloop.StatusInput{OperationID: r.OperationID})
					return &openaitest.Turn{Calls: []openaitest.Call{{Name: statusTool, Arguments: string(args)}}}
				}
			}
			return &openaitest.Turn{Text: "The refund draft is created."}
		}},
		{Text: "Confirmed: the refund draft exists; nothing was created twice."},
	}
}

func run(ctx context.Context, w io.Writer, pretty bool) error {
	// The three signals: spans to w as they end, metrics read at the end,
	// log records to w at Debug.
	expOpts := []stdouttrace.Option{stdouttrace.WithWriter(w), stdouttrace.WithoutTimestamps()}
	if pretty {
		expOpts = append(expOpts, stdouttrace.WithPrettyPrint())
	}
	exp, err := stdouttrace.New(expOpts...)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))

	svc := orders.NewService()
	client, model, closeClient := demo.Client(w, script(svc)...)
	defer closeClient()
	rdb, closeRedis, err := demo.Redis(w)
	if err != nil {
		return err
	}
	defer closeRedis()
	store, err := idem.New(rdb, idem.Options{})
	if err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := guard.NewSigner(key)
	if err != nil {
		return err
	}

	// The guard, observed.
	tools := orders.Tools(svc)
	opts := guard.Options{Signer: signer}
	err = observe.Config{TracerProvider: tp, MeterProvider: mp, Logger: logger,
		Options: []observe.Option{observe.WithTools(tools), observe.WithStatusTool(statusTool)}}.Apply(&opts)
	if err != nil {
		return err
	}
	g := guard.New(tools, store, opts)

	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	a := &agent{client: client, model: model, guard: g, tools: tools, signer: signer, principal: principal, w: w}
	ctx, span := tp.Tracer("github.com/toolguard/toolguard/examples/otel").Start(ctx, "invoke_agent refund-agent",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "refund-agent")))
	text, err := a.run(ctx, "My order ORDER-7 arrived damaged, please refund it.")
	span.End()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "assistant:", text)

	if err := printMetrics(ctx, w, reader); err != nil {
		return err
	}
	n, err := guard.VerifyAudit(ctx, store, principal.TenantID)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	fmt.Fprintf(w, "drafts:    %d created downstream\n", svc.SideEffects())
	fmt.Fprintf(w, "audit:     %d records, hash chain verified\n", n)
	return nil
}

// agent is a minimal Responses agent loop over the observed guard: what
// agentloop does, without its approvals API and saved runs.
type agent struct {
	client    oai.Client
	model     string
	guard     *guard.Guard
	tools     *toolset.Set
	signer    *guard.Signer
	principal guard.Principal
	w         io.Writer
}

func (a *agent) run(ctx context.Context, input string) (string, error) {
	defs := append(tgopenai.Tools(a.tools), statusToolDef())
	params := responses.ResponseNewParams{Model: a.model, Tools: defs,
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(input)}}
	for turn := 0; turn < 8; turn++ {
		resp, err := a.client.Responses.New(ctx, params)
		if err != nil {
			return "", err
		}
		calls := tgopenai.FunctionCalls(resp)
		if len(calls) == 0 {
			return resp.OutputText(), nil
		}
		var items []responses.ResponseInputItemUnionParam
		for _, c := range calls {
			res, err := a.call(ctx, resp.ID, c)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(a.w, "guard:     %s %s (%s)\n", c.Name, res.Code, res.Delivery)
			items = append(items, tgopenai.Output(c.CallID, res))
		}
		params.PreviousResponseID = oai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	}
	return "", fmt.Errorf("no final answer after 8 turns")
}

// call dispatches one function call: the status tool to QueryStatus, the
// others to Dispatch, approving writes that ask for it (this host approves
// everything).
func (a *agent) call(ctx context.Context, respID string, c responses.ResponseFunctionToolCall) (*guard.Result, error) {
	if c.Name == statusTool {
		var in agentloop.StatusInput
		if err := json.Unmarshal([]byte(c.Arguments), &in); err != nil || in.OperationID == "" {
			return &guard.Result{Code: guard.InvalidArguments, Message: `The status tool takes {"operation_id": "…"}.`}, nil
		}
		return a.guard.QueryStatus(ctx, guard.StatusCall{Principal: a.principal, OperationID: in.OperationID,
			Context: tgopenai.Context(respID, c)})
	}
	call := tgopenai.Call(a.principal, respID, c)
	res, err := a.guard.Dispatch(ctx, call)
	if err != nil || res.Code != guard.ApprovalRequired {
		return res, err
	}
	fmt.Fprintf(a.w, "approval:  %s %s approved\n", c.Name, c.Arguments)
	tok, err := a.signer.Sign(guard.NewGrant(a.principal, call.Proposal, "auto-approver", time.Now(), 5*time.Minute))
	if err != nil {
		return nil, err
	}
	call.Approval = tok
	return a.guard.Dispatch(ctx, call)
}

func statusToolDef() responses.ToolUnionParam {
	s, err := toolset.SchemaFor[agentloop.StatusInput]()
	if err != nil {
		panic(err)
	}
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: statusTool, Parameters: s.Map(), Strict: oai.Bool(true),
		Description: oai.String("Ask for the outcome of an earlier operation whose result said recovery query_status.")}}
}

// printMetrics prints the counters of the run, one line per series.
func printMetrics(ctx context.Context, w io.Writer, reader *sdkmetric.ManualReader) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					var attrs []string
					for _, kv := range p.Attributes.ToSlice() {
						attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
					}
					lines = append(lines, fmt.Sprintf("metric:    %s{%s} %d", m.Name, strings.Join(attrs, ","), p.Value))
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}
