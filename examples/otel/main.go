// Command otel is an offline example agent run with every tool call traced,
// measured and logged through package observe: OpenTelemetry spans, slog
// records, and the metrics of the run.
//
// The model reads an order, drafts a refund (a write that needs approval:
// the first dispatch says APPROVAL_REQUIRED, the host approves and
// dispatches again), the reply of the order service is lost
// (OUTCOME_UNKNOWN), and the model asks the status tool, which settles the
// outcome from the service's receipt. Every dispatch and status query is one
// "execute_tool …" span under the model turn's "chat …" span, under the
// run's "invoke_agent refund-agent" span.
//
//	go run ./examples/otel         # the transcript, log lines, a span tree and the metrics
//	go run ./examples/otel -json   # spans (stdouttrace exporter) and logs as raw JSON lines
//
// With OPENAI_API_KEY set it talks to the real API; with
// TOOLGUARD_REDIS_URL (or its alias REDIS_URL) set it keeps its records in
// that Redis, each run a fresh one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/observe"
	"github.com/toolguard/toolguard/toolset"
)

func main() {
	asJSON := flag.Bool("json", false, "print spans and logs as raw JSON lines instead of a span tree and text logs")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "otel:", err)
		os.Exit(1)
	}
}

const statusTool = toolset.StatusToolName

// script is the fake model. Before it asks for the draft it makes the order
// service lose its next reply.
func script(svc *orders.Service) []fakemodel.Turn {
	return []fakemodel.Turn{
		{Calls: []fakemodel.Call{{Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}},
		{Respond: func(fakemodel.Request) *fakemodel.Turn {
			svc.FailNext(orders.FailAfterCommit) // the draft is created, then the reply is lost
			return &fakemodel.Turn{Text: "ORDER-7 arrived damaged; drafting the refund.",
				Calls: []fakemodel.Call{{Name: "create_refund_draft", Arguments: `{"order_ref":"ORDER-7","reason":"damaged"}`}}}
		}},
		{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			for _, r := range demo.LastOutputs(req) {
				if r.Recovery() == guard.RecoveryQueryStatus {
					args, _ := json.Marshal(toolset.StatusInput{OperationID: r.OperationID})
					return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: statusTool, Arguments: string(args)}}}
				}
			}
			return &fakemodel.Turn{Text: "The refund draft is created."}
		}},
		{Text: "Confirmed: the refund draft exists; nothing was created twice."},
	}
}

func run(ctx context.Context, w io.Writer, asJSON bool) error {
	// The three signals. Spans: recorded and printed as a tree at the end,
	// or with -json written to w by the stdout exporter as each ends.
	// Metrics: read at the end. Logs: to w at Debug.
	var (
		tp       *sdktrace.TracerProvider
		recorder *tracetest.SpanRecorder
		logger   *slog.Logger
	)
	if asJSON {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return err
		}
		tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		logger = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		recorder = tracetest.NewSpanRecorder()
		tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
		logger = slog.New(logHandler(w))
	}
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	svc := orders.NewService()
	client, model, closeClient := demo.Client(w, script(svc)...)
	defer closeClient()
	rdb, closeRedis, err := demo.Redis(w)
	if err != nil {
		return err
	}
	defer closeRedis()
	guardStore, err := demo.Store(rdb)
	if err != nil {
		return err
	}
	// The loop, observed: tool spans nest under a span per model turn,
	// under the run's span.
	tools := orders.Tools(svc)
	approveAll := host.ApproverFunc(func(context.Context, host.ApprovalRequest) (host.Decision, error) {
		return host.Decision{Approved: true, Approver: "auto-approver"}, nil
	})
	var gopts guard.Options
	if err := (observe.Options{TracerProvider: tp, MeterProvider: mp, Logger: logger,
		Tools: tools, StatusTool: statusTool}).Apply(&gopts); err != nil {
		return err
	}
	loop := agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{Name: model}), tools, agentloop.Options{Store: guardStore,
		Approver: approveAll, TracerProvider: tp, AgentName: "refund-agent",
		Observer: func(e agentloop.Event) {
			if e.Kind == agentloop.EventResult || e.Kind == agentloop.EventApproved {
				fmt.Fprintln(w, e)
			}
		},
		Guard: gopts})
	principal := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}
	before, err := demo.AuditCount(ctx, loop.Store(), principal.TenantID)
	if err != nil {
		return err
	}
	res, err := loop.Run(ctx, principal, "My order ORDER-7 arrived damaged, please refund it.")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "assistant:", res.Output)

	if recorder != nil {
		printSpanTree(w, recorder.Ended())
	}
	if err := printMetrics(ctx, w, reader); err != nil {
		return err
	}
	fmt.Fprintf(w, "drafts:    %d created downstream\n", svc.SideEffects())
	return demo.PrintAudit(ctx, w, loop.Store(), principal.TenantID, before)
}
