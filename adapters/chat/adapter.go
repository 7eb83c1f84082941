// Package tgchat adapts the OpenAI Chat Completions API
// (github.com/openai/openai-go/v3, client.Chat.Completions) to the guard:
// an assistant message's tool_calls become canonical proposals with their
// execution context, guard results become role "tool" messages whose
// content is the tool-model-result-v2 JSON, and a toolset becomes strict
// function tools. Model is the same API as package agentloop's provider,
// streamed through the SDK's ChatCompletionAccumulator.
//
// # The adapters' shape
//
// The four adapters (tgopenai, tgchat, tganthropic, tggemini) export the
// same set, with the same signatures but for their API's types: Tools(set)
// the tool definitions to send; Calls(reply, tools) the reply's calls as
// provider.ToolCall; Call(principal, scope, responseID, c) the guard call
// of one; Output(c, result) the item answering it; Outputs(items...) the
// answers as the next request takes them; OutputText(item) an answer's
// call id and tool-model-result-v2 text; Model, ModelOptions, NewModel and
// DefaultModel the provider of package agentloop.
//
// The package is named tgchat, so it needs no alias next to openai-go:
//
//	import "github.com/toolguard/toolguard/adapters/chat"
package tgchat

import (
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	providerName = "openai"
	apiFamily    = "chat_completions"
	revision     = "openai-chat-v1"
)

// info names the adapter.
var info = provider.Info{Provider: providerName, APIFamily: apiFamily, Revision: revision}

// kindCustom tags a custom (free-form) tool call in provider.ToolCall.Kind.
const kindCustom = "custom"

// Call returns the guard call of c, a call Calls returned from the
// completion with completionID, for the principal, which comes from the
// host, never from the model, in a scope the host names
// (guard.ExecutionContext.Scope): a write the model repeats in the scope is
// the same operation and replays. "" names no scope. A call Calls answered
// (c.Answer set: a custom tool call) must not be dispatched: answer it with
// Output(c, c.Answer).
func Call(p guard.Principal, scope, completionID string, c provider.ToolCall) guard.Call {
	return info.Call(p, scope, completionID, c)
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
			calls = append(calls, provider.ToolCall{ID: tc.ID, Name: tc.Custom.Name, Arguments: tc.Custom.Input, Kind: kindCustom,
				Answer: kit.Unknown("No free-form tool " + tc.Custom.Name + " is offered; call one of the function tools with JSON arguments.")})
			continue
		}
		calls = append(calls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name,
			Arguments: string(kit.FillArgs(tools, tc.Function.Name, []byte(tc.Function.Arguments)))})
	}
	return calls
}

// Output returns the role "tool" message answering c with the result: its
// content is the tool-model-result-v2 JSON.
func Output(c provider.ToolCall, res *guard.Result) oai.ChatCompletionMessageParamUnion {
	return oai.ToolMessage(res.String(), c.ID)
}

// Outputs returns the messages that answer every tool call of an
// assistant message, in order, to append to the conversation: the
// messages Output made.
func Outputs(msgs ...oai.ChatCompletionMessageParamUnion) []oai.ChatCompletionMessageParamUnion {
	return msgs
}

// OutputText returns the tool call id and content of a message made by
// Output, and false for any other message.
func OutputText(msg oai.ChatCompletionMessageParamUnion) (callID, text string, ok bool) {
	t := msg.OfTool
	if t == nil || !t.Content.OfString.Valid() {
		return "", "", false
	}
	return t.ToolCallID, t.Content.OfString.Value, true
}

// Tools returns the function tools of every tool in the set, with the very
// schema the guard validates arguments against: strict when the schema is.
func Tools(set *toolset.Set) []oai.ChatCompletionToolUnionParam { return toolParams(set.Tools()) }

// toolParam returns the function tool of one tool: strict when its schema is
// (toolset.Schema.Strict, every toolset.Read and Write tool), and
// otherwise, as for a schema from toolset.CompileSchema, the schema as is
// with strict false.
func toolParam(t toolset.Declared) oai.ChatCompletionToolUnionParam {
	fn := shared.FunctionDefinitionParam{Name: t.Name(), Parameters: t.Schema().Map(), Strict: oai.Bool(t.Schema().Strict())}
	if d := t.Description(); d != "" {
		fn.Description = oai.String(d)
	}
	return oai.ChatCompletionFunctionTool(fn)
}

func toolParams(tools []toolset.Declared) []oai.ChatCompletionToolUnionParam {
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, toolParam(t))
	}
	return out
}
