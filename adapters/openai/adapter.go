// Package tgopenai adapts the OpenAI Responses API (github.com/openai/openai-go/v3)
// to the guard: function_call output items become canonical proposals with
// their execution context, guard results become function_call_output input
// items whose output is the tool-model-result-v2 JSON, and a toolset becomes
// strict function tool definitions.
//
// The package is named tgopenai, so it needs no alias next to openai-go:
//
//	import "github.com/toolguard/toolguard/adapters/openai"
package tgopenai

import (
	"encoding/json"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolguard/toolguard/agentloop/provider"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	Provider  = "openai"
	APIFamily = "responses"
	Revision  = "openai-responses-v1"
)

// Proposal returns the canonical proposal of a function call. The arguments
// string is passed on as the model wrote it, malformed or not: the guard
// answers bad arguments with INVALID_ARGUMENTS, so nothing is dropped.
//
// A call in a namespace names its tool "namespace.name" (ToolName): it
// runs only a tool declared under that qualified name, never a top-level
// tool of the same name (contract section 8). toolset names cannot
// contain a dot, so with a toolset such a call is UNKNOWN_TOOL.
func Proposal(call responses.ResponseFunctionToolCall) guard.Proposal {
	return guard.Proposal{Name: ToolName(call), Arguments: []byte(call.Arguments)}
}

// ToolName is the tool a function call names: its name, qualified by its
// namespace when it has one.
func ToolName(call responses.ResponseFunctionToolCall) string {
	if call.Namespace != "" {
		return call.Namespace + "." + call.Name
	}
	return call.Name
}

// KindCustom tags a custom (free-form) tool call in provider.ToolCall.Kind; it
// is answered with a custom_tool_call_output item.
const KindCustom = "custom"

// Calls returns the tool calls of a response in order, as package agentloop
// runs them (contract section 8): function calls with their arguments (a
// namespaced one under its qualified ToolName; absent nullable members of
// a strict tool's schema filled with null, as every adapter's Calls does:
// tools are the tools the request offered); a function call whose
// status is in_progress or incomplete answered INVALID_ARGUMENTS without
// running; a custom tool call answered UNKNOWN_TOOL (only function tools
// are offered). None is dropped.
func Calls(resp *responses.Response, tools []toolset.Declared) []provider.ToolCall {
	var calls []provider.ToolCall
	for _, item := range resp.Output {
		if c, ok := itemCall(item, tools); ok {
			calls = append(calls, c)
		}
	}
	return calls
}

// itemCall is the call an output item makes, if it is one.
func itemCall(item responses.ResponseOutputItemUnion, tools []toolset.Declared) (provider.ToolCall, bool) {
	switch item.Type {
	case "function_call":
		fc := item.AsFunctionCall()
		name := ToolName(fc)
		c := provider.ToolCall{ID: fc.CallID, Name: name, Arguments: string(provider.FillArgs(tools, name, []byte(fc.Arguments)))}
		if fc.Status == "in_progress" || fc.Status == "incomplete" {
			c.Answer = provider.Invalid("The call was not complete (status " + string(fc.Status) + "); nothing was run. Call the tool again with complete arguments.")
		}
		return c, true
	case "custom_tool_call":
		var cc responses.ResponseCustomToolCall
		_ = json.Unmarshal([]byte(item.RawJSON()), &cc)
		return provider.ToolCall{ID: cc.CallID, Name: cc.Name, Arguments: cc.Input, Kind: KindCustom,
			Answer: provider.Unknown("No free-form tool " + cc.Name + " is offered; call one of the function tools with JSON arguments.")}, true
	}
	return provider.ToolCall{}, false
}

// Context returns the execution context of a function call carried by the
// response with responseID. OperationID and IdempotencyKey are left for the
// host (the guard defaults the operation id to the call id). A call id the
// guard would refuse (too long, not UTF-8) is replaced by guard.SafeID's
// stable stand-in; the output item still answers the provider's own id.
func Context(responseID string, call responses.ResponseFunctionToolCall) guard.ExecutionContext {
	return guard.ExecutionContext{
		Provider:        Provider,
		APIFamily:       APIFamily,
		ResponseID:      responseID,
		CallID:          guard.SafeID(call.CallID),
		AdapterRevision: Revision,
	}
}

// Call returns the guard call of a function call for the principal, which
// comes from the host, never from the model, in a scope the host names (a
// conversation, a session, a run; guard.ExecutionContext.Scope): a write
// the model repeats in the scope, with a new call id and no key, is the
// same operation and replays instead of running again. "" names no scope:
// each call id is its own operation.
func Call(p guard.Principal, scope, responseID string, call responses.ResponseFunctionToolCall) guard.Call {
	c := guard.Call{Principal: p, Proposal: Proposal(call), Context: Context(responseID, call)}
	c.Context.Scope = scope
	return c
}

// FunctionCalls returns the function_call items of a response, in order.
func FunctionCalls(resp *responses.Response) []responses.ResponseFunctionToolCall {
	var calls []responses.ResponseFunctionToolCall
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			calls = append(calls, item.AsFunctionCall())
		}
	}
	return calls
}

// Output returns the function_call_output input item answering callID with
// the result, whose output is the tool-model-result-v2 JSON.
func Output(callID string, res *guard.Result) responses.ResponseInputItemUnionParam {
	return outputItem(callID, res.String())
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = oai.String(callID)
	return item
}

// OutputText returns the output string of a function_call_output item made
// by Output, and false for any other item.
func OutputText(item responses.ResponseInputItemUnionParam) (callID, output string, ok bool) {
	o := item.OfFunctionCallOutput
	if o == nil || !o.Output.OfString.Valid() {
		return "", "", false
	}
	return o.CallID.Value, o.Output.OfString.Value, true
}

// Tools returns the function tool definitions of every tool in the set,
// with the very schema the guard validates arguments against (see Tool).
func Tools(set *toolset.Set) []responses.ToolUnionParam {
	tools := set.Tools()
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, Tool(t))
	}
	return out
}

// Tool returns the function tool definition of one tool: strict when its
// schema is (toolset.Schema.Strict, every toolset.Read and Write tool), and
// otherwise, as for a schema from toolset.CompileSchema, the schema as is
// with strict false, since strict mode would refuse or reinterpret it.
func Tool(t toolset.Declared) responses.ToolUnionParam {
	fn := &responses.FunctionToolParam{
		Name:       t.Name(),
		Parameters: t.Schema().Map(),
		Strict:     oai.Bool(t.Schema().Strict()),
	}
	if d := t.Description(); d != "" {
		fn.Description = oai.String(d)
	}
	return responses.ToolUnionParam{OfFunction: fn}
}
