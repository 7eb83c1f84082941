// Package tganthropic adapts the Anthropic Messages API
// (github.com/anthropics/anthropic-sdk-go/v2) to the guard: tool_use blocks
// become canonical proposals with their execution context, guard results
// become one user message of tool_result blocks whose content is the
// tool-model-result-v2 JSON, with is_error set when the code is not OK, and
// a toolset becomes tool definitions. Model is the same API as package
// agentloop's provider, streamed through the SDK's Message.Accumulate.
//
// The Messages API has no strict mode for these tools, so the model may
// leave out optional members: for a tool whose schema is strict
// (toolset.Schema.Strict), Calls fills an absent member whose schema allows
// null with null (contract section 3; provider.FillNulls) before the guard
// sees it. A schema that is not strict, such as a remote MCP tool's, gives
// an absent member its own meaning, and nothing is filled.
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
// The package is named tganthropic, so it needs no alias next to the SDK:
//
//	import "github.com/toolguard/toolguard/adapters/anthropic"
package tganthropic

import (
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	providerName = "anthropic"
	apiFamily    = "messages"
	revision     = "anthropic-messages-v1"
)

var info = provider.Info{Provider: providerName, APIFamily: apiFamily, Revision: revision}

// toolNameOf is the tool a tool_use block names: its name, qualified by its
// toolset when it has one ("toolset.name"), so that a toolset member runs
// only a tool declared under that name, never a top-level tool of the same
// name (contract section 3, namespaced tools).
func toolNameOf(block sdk.ContentBlockUnion) string {
	if block.ToolsetName != "" {
		return block.ToolsetName + "." + block.Name
	}
	return block.Name
}

// Calls returns the tool_use blocks of a message in order, as package
// agentloop runs them, their input with absent nullable members filled
// with null when the tool of that name among tools (the tools the request
// offered) has a strict schema.
func Calls(msg *sdk.Message, tools []toolset.Declared) []provider.ToolCall {
	var calls []provider.ToolCall
	for _, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		calls = append(calls, blockCall(b, tools))
	}
	return calls
}

// blockCall is the call of a tool_use block.
func blockCall(b sdk.ContentBlockUnion, tools []toolset.Declared) provider.ToolCall {
	name := toolNameOf(b)
	return provider.ToolCall{ID: b.ID, Name: name, Arguments: string(kit.FillArgs(tools, name, b.Input))}
}

// Call returns the guard call of c, a call Calls returned from the
// message with messageID, for the principal, which comes from the host,
// never from the model, in a scope the host names
// (guard.ExecutionContext.Scope): a write the model repeats in the scope is
// the same operation and replays. "" names no scope.
func Call(p guard.Principal, scope, messageID string, c provider.ToolCall) guard.Call {
	return info.Call(p, scope, messageID, c)
}

// Output returns the tool_result block answering c: its content is the
// tool-model-result-v2 JSON, is_error is set when the code is not OK.
func Output(c provider.ToolCall, res *guard.Result) sdk.ContentBlockParamUnion {
	return sdk.NewToolResultBlock(c.ID, res.String(), res.Code != guard.CodeOK)
}

// Outputs returns the one user message that answers every tool_use block
// of a message, in order: the blocks Output made.
func Outputs(blocks ...sdk.ContentBlockParamUnion) sdk.MessageParam {
	return sdk.NewUserMessage(blocks...)
}

// OutputText returns the tool_use id and text of a block made by Output
// (its is_error is the block's IsError), and false for any other block.
func OutputText(block sdk.ContentBlockParamUnion) (callID, text string, ok bool) {
	r := block.OfToolResult
	if r == nil || len(r.Content) != 1 || r.Content[0].OfText == nil {
		return "", "", false
	}
	return r.ToolUseID, r.Content[0].OfText.Text, true
}

// Tools returns the tool definitions of every tool in the set, with the
// very schema the guard validates arguments against.
func Tools(set *toolset.Set) []sdk.ToolUnionParam { return toolParams(set.Tools()) }

// toolParam returns the definition of one tool.
func toolParam(t toolset.Declared) sdk.ToolUnionParam {
	schema := t.Schema().Map()
	in := sdk.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
	required, _ := schema["required"].([]any)
	for _, r := range required {
		if name, ok := r.(string); ok {
			in.Required = append(in.Required, name)
		}
	}
	for k, v := range schema {
		if k != "properties" && k != "required" && k != "type" {
			in.ExtraFields[k] = v
		}
	}
	tp := &sdk.ToolParam{Name: t.Name(), InputSchema: in}
	if d := t.Description(); d != "" {
		tp.Description = sdk.String(d)
	}
	return sdk.ToolUnionParam{OfTool: tp}
}

func toolParams(tools []toolset.Declared) []sdk.ToolUnionParam {
	out := make([]sdk.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, toolParam(t))
	}
	return out
}

// text returns the concatenated text blocks of a message.
func text(msg *sdk.Message) string {
	var b strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}
