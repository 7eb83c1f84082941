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

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	providerName = "openai"
	apiFamily    = "responses"
	revision     = "openai-responses-v1"
)

// qualifiedName is the tool a function call names: its name, qualified by its
// namespace when it has one ("namespace.name"). Such a call runs only a
// tool declared under that qualified name, never a top-level tool of the
// same name (contract section 3); toolset names cannot contain a dot, so
// with a toolset it is UNKNOWN_TOOL.
func qualifiedName(call responses.ResponseFunctionToolCall) string {
	if call.Namespace != "" {
		return call.Namespace + "." + call.Name
	}
	return call.Name
}

// kindCustom tags a custom (free-form) tool call in provider.ToolCall.Kind; it
// is answered with a custom_tool_call_output item.
const kindCustom = "custom"

// Calls returns the tool calls of a response in order, as package agentloop
// runs them (contract section 3): function calls with their arguments (a
// namespaced one under its qualified name, "namespace.name"; absent nullable members of
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
		name := qualifiedName(fc)
		c := provider.ToolCall{ID: fc.CallID, Name: name, Arguments: string(kit.FillArgs(tools, name, []byte(fc.Arguments)))}
		if fc.Status == "in_progress" || fc.Status == "incomplete" {
			c.Answer = kit.Invalid("The call was not complete (status " + string(fc.Status) + "); nothing was run. Call the tool again with complete arguments.")
		}
		return c, true
	case "custom_tool_call":
		var cc responses.ResponseCustomToolCall
		_ = json.Unmarshal([]byte(item.RawJSON()), &cc)
		return provider.ToolCall{ID: cc.CallID, Name: cc.Name, Arguments: cc.Input, Kind: kindCustom,
			Answer: kit.Unknown("No free-form tool " + cc.Name + " is offered; call one of the function tools with JSON arguments.")}, true
	}
	return provider.ToolCall{}, false
}

// Call returns the guard call of a call that Calls decoded (and left
// without an Answer) for the principal, which comes from the host, never
// from the model, in a scope the host names (a conversation, a session, a
// run; guard.ExecutionContext.Scope): a write the model repeats in the
// scope, with a new call id and no key, is the same operation and replays
// instead of running again. "" names no scope: each call id is its own
// operation. A call Calls answered (c.Answer set: an incomplete or custom
// tool call) must not be dispatched: answer it with Output(c, c.Answer).
func Call(p guard.Principal, scope, responseID string, c provider.ToolCall) guard.Call {
	ctx := guard.ExecutionContext{Provider: providerName, APIFamily: apiFamily, ResponseID: responseID,
		CallID: guard.SafeID(c.ID), AdapterRevision: revision, Scope: scope}
	return guard.Call{Principal: p, Proposal: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)}, Context: ctx}
}

// Output returns the input item that answers c with the result, whose
// output is the tool-model-result-v2 JSON: a function_call_output item, or
// a custom_tool_call_output item for a custom tool call (kindCustom).
func Output(c provider.ToolCall, res *guard.Result) responses.ResponseInputItemUnionParam {
	if c.Kind == kindCustom {
		return responses.ResponseInputItemParamOfCustomToolCallOutput(c.ID, res.String())
	}
	return outputItem(c.ID, res.String())
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = oai.String(callID)
	return item
}

// Outputs returns the input items that answer every call of a response,
// in order, for the next request: the items Output made.
func Outputs(items ...responses.ResponseInputItemUnionParam) responses.ResponseInputParam {
	return items
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
// with the very schema the guard validates arguments against: strict when
// the schema is (toolset.Schema.Strict), else as is with strict false.
func Tools(set *toolset.Set) []responses.ToolUnionParam {
	tools := set.Tools()
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, toolParam(t))
	}
	return out
}

// toolParam returns the function tool definition of one tool: strict when its
// schema is (toolset.Schema.Strict, every toolset.Read and Write tool), and
// otherwise, as for a schema from toolset.CompileSchema, the schema as is
// with strict false, since strict mode would refuse or reinterpret it.
func toolParam(t toolset.Declared) responses.ToolUnionParam {
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
