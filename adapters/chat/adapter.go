// Package tgchat adapts the OpenAI Chat Completions API
// (github.com/openai/openai-go/v3, client.Chat.Completions) to the guard:
// an assistant message's tool_calls become canonical proposals with their
// execution context, guard results become role "tool" messages whose
// content is the tool-model-result-v2 JSON, and a toolset becomes strict
// function tools. Model is the same API as package agentloop's provider,
// streamed through the SDK's ChatCompletionAccumulator.
//
// The package is named tgchat, so it needs no alias next to openai-go:
//
//	import "github.com/toolguard/toolguard/adapters/chat"
package tgchat

import (
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	Provider  = "openai"
	APIFamily = "chat_completions"
	Revision  = "openai-chat-v1"
)

// info names the adapter.
var info = provider.Info{Provider: Provider, APIFamily: APIFamily, Revision: Revision}

// KindCustom tags a custom (free-form) tool call in provider.ToolCall.Kind.
const KindCustom = "custom"

// Proposal returns the canonical proposal of a function tool call; the
// arguments string is passed on as the model wrote it.
func Proposal(call oai.ChatCompletionMessageFunctionToolCall) guard.Proposal {
	return guard.Proposal{Name: call.Function.Name, Arguments: []byte(call.Function.Arguments)}
}

// Context returns the execution context of a tool call carried by the
// completion with completionID.
func Context(completionID, callID string) guard.ExecutionContext {
	return info.Context(completionID, callID)
}

// Call returns the guard call of a function tool call for the principal,
// which comes from the host, never from the model, in a scope the host
// names (guard.ExecutionContext.Scope): a write the model repeats in the
// scope is the same operation and replays. "" names no scope.
func Call(p guard.Principal, scope, completionID string, call oai.ChatCompletionMessageFunctionToolCall) guard.Call {
	c := guard.Call{Principal: p, Proposal: Proposal(call), Context: Context(completionID, call.ID)}
	c.Context.Scope = scope
	return c
}

// Calls returns the tool calls of an assistant message in order, as package
// agentloop runs them: function calls with their arguments, absent
// nullable members of a strict schema filled with null (FillNulls:
// OpenAI-compatible servers may not honour strict mode; a schema that is not
// strict gives absent its own meaning, so nothing is filled), and custom tool calls answered UNKNOWN_TOOL
// without running (only function tools are offered). tools are the tools
// the request offered.
func Calls(msg oai.ChatCompletionMessage, tools []toolset.Declared) []provider.ToolCall {
	var calls []provider.ToolCall
	for _, tc := range msg.ToolCalls {
		if tc.Type == "custom" {
			calls = append(calls, provider.ToolCall{ID: tc.ID, Name: tc.Custom.Name, Arguments: tc.Custom.Input, Kind: KindCustom,
				Answer: provider.Unknown("No free-form tool " + tc.Custom.Name + " is offered; call one of the function tools with JSON arguments.")})
			continue
		}
		calls = append(calls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name,
			Arguments: string(provider.FillArgs(tools, tc.Function.Name, []byte(tc.Function.Arguments)))})
	}
	return calls
}

// fill fills absent nullable members of a call to a known tool whose
// schema is strict.
// Output returns the role "tool" message answering callID with the
// result: its content is the tool-model-result-v2 JSON.
func Output(callID string, res *guard.Result) oai.ChatCompletionMessageParamUnion {
	return oai.ToolMessage(res.String(), callID)
}

// OutputText returns the tool call id and content of a message made by
// Output, and false for any other message.
func OutputText(msg oai.ChatCompletionMessageParamUnion) (callID, content string, ok bool) {
	t := msg.OfTool
	if t == nil || !t.Content.OfString.Valid() {
		return "", "", false
	}
	return t.ToolCallID, t.Content.OfString.Value, true
}

// Tools returns the function tools of every tool in the set, with the very
// schema the guard validates arguments against (see Tool).
func Tools(set *toolset.Set) []oai.ChatCompletionToolUnionParam { return toolParams(set.Tools()) }

// Tool returns the function tool of one tool: strict when its schema is
// (toolset.Schema.Strict, every toolset.Read and Write tool), and
// otherwise, as for a schema from toolset.CompileSchema, the schema as is
// with strict false.
func Tool(t toolset.Declared) oai.ChatCompletionToolUnionParam {
	fn := shared.FunctionDefinitionParam{Name: t.Name(), Parameters: t.Schema().Map(), Strict: oai.Bool(t.Schema().Strict())}
	if d := t.Description(); d != "" {
		fn.Description = oai.String(d)
	}
	return oai.ChatCompletionFunctionTool(fn)
}

func toolParams(tools []toolset.Declared) []oai.ChatCompletionToolUnionParam {
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, Tool(t))
	}
	return out
}
