package tgeino

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// Guarded runs Eino's tool calls through a guard.Guard: each call Eino makes
// becomes a guard.Call (tool name, arguments, call id; the principal and
// the scope from the host's functions of the context), and its answer goes
// back as the tool's output, the tool-model-result-v2 JSON. It is safe for
// concurrent use.
type Guarded struct {
	h       *host.Host
	offered []tool.BaseTool
	own     map[string]bool // tools the guard runs itself (toolset tools, the status tool), by name
}

// New returns a Guarded over g, whose tools are set: the tools the model is
// offered (Tools), each declared with package toolset or wrapped from an
// Eino tool (Import). Every tool of set must be the one g looks up by its
// name. The zero value of every field of opts (host.Options, the options
// of the host step every integration takes) means its default: Principal
// reads host.WithPrincipal's principal, Scope host.WithScope's scope (or
// use SessionScope, from Eino's session values, which its checkpoints
// keep); provider, apiFamily and adapterRevision default to this
// package's names. Without an Approver a write that waits for a human
// interrupts the run (compose.StatefulInterrupt; see Approvals and
// Resume).
func New(g *guard.Guard, set *toolset.Set, opts host.Options) (*Guarded, error) {
	if opts.Provider == "" {
		opts.Provider, opts.APIFamily, opts.AdapterRevision = provider, apiFamily, adapterRevision
	}
	h, err := host.New(g, set, opts)
	if err != nil {
		return nil, fmt.Errorf("tgeino: %w", err)
	}
	eg := &Guarded{h: h, own: map[string]bool{}}
	for _, d := range h.Tools() {
		if w, ok := d.(*Tool); ok {
			eg.offered = append(eg.offered, w.eino)
			continue
		}
		eg.own[d.Name()] = true
		et, err := newDeclaredTool(d)
		if err != nil {
			return nil, err
		}
		eg.offered = append(eg.offered, et)
	}
	return eg, nil
}

// Tools returns the Eino tools to give the model and the ToolsNode (or a
// ChatModelAgent's ToolsConfig): each tool of the set with the schema its
// arguments are validated against (a wrapped Eino tool as itself), and the
// status tool. Only the middleware runs them.
func (eg *Guarded) Tools() []tool.BaseTool { return append([]tool.BaseTool(nil), eg.offered...) }

// ToolsNodeConfig returns a ToolsNode configuration with Tools, the
// middleware and UnknownToolsHandler: the whole of what a compose graph's
// ToolsNode, or an adk.ChatModelAgent's ToolsConfig, needs.
func (eg *Guarded) ToolsNodeConfig() compose.ToolsNodeConfig {
	return compose.ToolsNodeConfig{
		Tools:               eg.Tools(),
		UnknownToolsHandler: eg.UnknownToolsHandler,
		ToolCallMiddlewares: []compose.ToolMiddleware{eg.ToolMiddleware()},
	}
}

// ToolMiddleware returns the middleware that answers every tool call of a
// ToolsNode through the guard, for ToolsNodeConfig.ToolCallMiddlewares. A
// call the guard lets through runs the tool: a toolset tool's function, or
// a wrapped Eino tool through the endpoint the middleware wraps. A tool
// the guard does not know is UNKNOWN_TOOL and never runs.
func (eg *Guarded) ToolMiddleware() compose.ToolMiddleware {
	return compose.ToolMiddleware{
		Invokable: func(next compose.InvokableToolEndpoint) compose.InvokableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.ToolOutput, error) {
				out, err := eg.answer(ctx, in.Name, in.Arguments, in.CallID, through(in, next, func(o *compose.ToolOutput) (string, error) {
					return o.Result, nil
				}))
				if err != nil {
					return nil, err
				}
				return &compose.ToolOutput{Result: out}, nil
			}
		},
		Streamable: func(next compose.StreamableToolEndpoint) compose.StreamableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.StreamToolOutput, error) {
				out, err := eg.answer(ctx, in.Name, in.Arguments, in.CallID, through(in, next, func(o *compose.StreamToolOutput) (string, error) {
					return concat(o.Result)
				}))
				if err != nil {
					return nil, err
				}
				return &compose.StreamToolOutput{Result: schema.StreamReaderFromArray([]string{out})}, nil
			}
		},
		EnhancedInvokable: func(compose.EnhancedInvokableToolEndpoint) compose.EnhancedInvokableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.EnhancedInvokableToolOutput, error) {
				out, err := eg.answer(ctx, in.Name, in.Arguments, in.CallID, nil)
				if err != nil {
					return nil, err
				}
				return &compose.EnhancedInvokableToolOutput{Result: textResult(out)}, nil
			}
		},
		EnhancedStreamable: func(compose.EnhancedStreamableToolEndpoint) compose.EnhancedStreamableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.EnhancedStreamableToolOutput, error) {
				out, err := eg.answer(ctx, in.Name, in.Arguments, in.CallID, nil)
				if err != nil {
					return nil, err
				}
				return &compose.EnhancedStreamableToolOutput{Result: schema.StreamReaderFromArray([]*schema.ToolResult{textResult(out)})}, nil
			}
		},
	}
}

// through runs a call through Eino's endpoint next, with the arguments the
// guard checked, and reads the tool's text from its output.
func through[O any](in *compose.ToolInput, next func(context.Context, *compose.ToolInput) (O, error), text func(O) (string, error)) runFunc {
	return func(ctx context.Context, args string) (string, error) {
		o, err := next(ctx, &compose.ToolInput{Name: in.Name, Arguments: args, CallID: in.CallID, CallOptions: in.CallOptions})
		if err != nil {
			return "", err
		}
		return text(o)
	}
}

// textResult is a model result as an enhanced tool's result.
func textResult(s string) *schema.ToolResult {
	return &schema.ToolResult{Parts: []schema.ToolOutputPart{{Type: schema.ToolPartTypeText, Text: s}}}
}

// UnknownToolsHandler answers a call of a tool the ToolsNode does not have,
// for ToolsNodeConfig.UnknownToolsHandler: the guard's UNKNOWN_TOOL (or,
// for a tool the guard has but the node was not given, the guard's
// answer), so that a model's invented tool is a result, not a failed run.
// Eino runs it without the middleware; the call id is the node's
// (compose.GetToolCallID).
func (eg *Guarded) UnknownToolsHandler(ctx context.Context, name, input string) (string, error) {
	return eg.answer(ctx, name, input, compose.GetToolCallID(ctx), nil)
}

// AgentMiddleware returns the guard as an adk.ChatModelAgentMiddleware, for
// ChatModelAgentConfig.Handlers: its WrapInvokableToolCall (and streamable
// variant) answers each tool call through the guard, as ToolMiddleware
// does. Give the agent Tools and UnknownToolsHandler in its ToolsConfig.
func (eg *Guarded) AgentMiddleware() adk.ChatModelAgentMiddleware { return &agentMiddleware{eg: eg} }

type agentMiddleware struct {
	*adk.BaseChatModelAgentMiddleware
	eg *Guarded
}

// WrapInvokableToolCall implements adk.ChatModelAgentMiddleware.
func (m *agentMiddleware) WrapInvokableToolCall(_ context.Context, next adk.InvokableToolCallEndpoint, tc *adk.ToolContext) (adk.InvokableToolCallEndpoint, error) {
	return func(ctx context.Context, args string, opts ...tool.Option) (string, error) {
		return m.eg.answer(ctx, tc.Name, args, tc.CallID, func(ctx context.Context, args string) (string, error) {
			return next(ctx, args, opts...)
		})
	}, nil
}

// WrapStreamableToolCall implements adk.ChatModelAgentMiddleware.
func (m *agentMiddleware) WrapStreamableToolCall(_ context.Context, next adk.StreamableToolCallEndpoint, tc *adk.ToolContext) (adk.StreamableToolCallEndpoint, error) {
	return func(ctx context.Context, args string, opts ...tool.Option) (*schema.StreamReader[string], error) {
		out, err := m.eg.answer(ctx, tc.Name, args, tc.CallID, func(ctx context.Context, args string) (string, error) {
			sr, err := next(ctx, args, opts...)
			if err != nil {
				return "", err
			}
			return concat(sr)
		})
		if err != nil {
			return nil, err
		}
		return schema.StreamReaderFromArray([]string{out}), nil
	}, nil
}

// WrapEnhancedInvokableToolCall implements adk.ChatModelAgentMiddleware.
func (m *agentMiddleware) WrapEnhancedInvokableToolCall(_ context.Context, _ adk.EnhancedInvokableToolCallEndpoint, tc *adk.ToolContext) (adk.EnhancedInvokableToolCallEndpoint, error) {
	return func(ctx context.Context, arg *schema.ToolArgument, _ ...tool.Option) (*schema.ToolResult, error) {
		out, err := m.eg.answer(ctx, tc.Name, argText(arg), tc.CallID, nil)
		if err != nil {
			return nil, err
		}
		return textResult(out), nil
	}, nil
}

// WrapEnhancedStreamableToolCall implements adk.ChatModelAgentMiddleware.
func (m *agentMiddleware) WrapEnhancedStreamableToolCall(_ context.Context, _ adk.EnhancedStreamableToolCallEndpoint, tc *adk.ToolContext) (adk.EnhancedStreamableToolCallEndpoint, error) {
	return func(ctx context.Context, arg *schema.ToolArgument, _ ...tool.Option) (*schema.StreamReader[*schema.ToolResult], error) {
		out, err := m.eg.answer(ctx, tc.Name, argText(arg), tc.CallID, nil)
		if err != nil {
			return nil, err
		}
		return schema.StreamReaderFromArray([]*schema.ToolResult{textResult(out)}), nil
	}, nil
}

func argText(a *schema.ToolArgument) string {
	if a == nil {
		return ""
	}
	return a.Text
}

// runFunc runs the tool through Eino's endpoint with the canonical
// arguments; nil when Eino has no endpoint the guard may run (the guard's
// toolset tools run their own function).
type runFunc func(ctx context.Context, args string) (string, error)

type endpointKey struct{}

// endpoint is the Eino endpoint of the call being dispatched, for
// Tool.Execute.
type endpoint struct {
	name string
	run  runFunc
}

// answer is one tool call through the guard: a status query for the
// status tool, else a dispatch, with the approval interrupt and resume
// around it. The string is the model result; an error is the host's (a
// principal that could not be had, a programming error the guard
// reported, an interrupt of the run) and no panic leaves it.
func (eg *Guarded) answer(ctx context.Context, name, args, callID string, run runFunc) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("tgeino: tool call %q: panic: %v", name, r)
		}
	}()
	if inv := host.InvocationFrom(ctx); inv != nil && run != nil && inv.Proposal.Name == name &&
		inv.Context.CallID == guard.SafeID(callID) && string(inv.Arguments) == args {
		// This very call is already the guard's: a wrapped tool running
		// through Eino's endpoint, which a second toolguard middleware
		// wraps too. Any other call (a nested agent's) is dispatched.
		return run(ctx, args)
	}
	if eg.own[name] {
		// Eino's endpoint, and so its tool callbacks, never run for the
		// guard's own tools: they fire here, with the model result.
		ctx = callbacks.OnStart(ctx, args)
		defer func() {
			if err != nil {
				callbacks.OnError(ctx, err)
			} else {
				callbacks.OnEnd(ctx, out)
			}
		}()
	}
	call, err := eg.h.Call(ctx, host.Frame{Name: name, Arguments: []byte(args), CallID: callID})
	if err != nil {
		return "", fmt.Errorf("tgeino: %w", err)
	}
	if run != nil {
		ctx = context.WithValue(ctx, endpointKey{}, &endpoint{name: name, run: run})
	}
	if res, err := eg.resume(ctx, call); err != nil || res != nil {
		if err != nil {
			return "", err
		}
		return res.String(), nil
	}
	a, err := eg.h.Answer(ctx, call)
	if err != nil {
		return "", fmt.Errorf("tgeino: %w", err)
	}
	if a.Ask != nil {
		// The run pauses here; its resume answers this very call (resume).
		p := host.PendingOf(*a.Ask)
		return "", compose.StatefulInterrupt(ctx, *a.Ask, &p)
	}
	return a.Result.String(), nil
}
