// Package provider is the model contract: what an agent loop (package
// agentloop, and package durable's runner) asks of a model API, so that one
// loop runs every provider: the adapters (adapters/openai for the Responses
// API, adapters/chat for Chat Completions, adapters/anthropic for Anthropic
// Messages, adapters/gemini for Gemini) each implement [Provider] over
// their official SDK. It sits below host and durable, which import nothing
// above it.
//
// The loop keeps the conversation as opaque JSON items in the provider's own
// wire format (so a paused run's state carries it whatever the provider),
// asks the provider for one turn at a time, dispatches the tool calls the
// provider decoded, and hands their model results back to the provider to
// shape into its tool-result items. Nothing here imports a provider SDK.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// Info names an adapter. Provider, APIFamily and Revision reach every
// execution context, and so the audit record, and the loop's telemetry.
type Info struct {
	Provider  string // e.g. "openai", "anthropic"
	APIFamily string // e.g. "responses", "chat_completions", "messages"
	Revision  string // the adapter's revision, e.g. "openai-responses-v2"
	Model     string // the model asked for
}

// Context returns the execution context of a call carried by the response
// with responseID. The call id passes through guard.SafeID.
func (i Info) Context(responseID, callID string) guard.ExecutionContext {
	return guard.ExecutionContext{Provider: i.Provider, APIFamily: i.APIFamily, ResponseID: responseID,
		CallID: guard.SafeID(callID), AdapterRevision: i.Revision}
}

// Call returns the guard call of c, a call of the response with
// responseID, for the principal, which comes from the host, never from the
// model, in a scope the host names (guard.ExecutionContext.Scope): a write
// the model repeats in the scope, with a new call id and no key, is the
// same operation and replays instead of running again. "" names no scope.
// Each adapter's Call is this, with its Info.
func (i Info) Call(p guard.Principal, scope, responseID string, c ToolCall) guard.Call {
	ctx := i.Context(responseID, c.ID)
	ctx.Scope = scope
	return guard.Call{Principal: p, Proposal: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)}, Context: ctx}
}

// Request is one model turn.
type Request struct {
	// Instructions is the system prompt, "" for none.
	Instructions string
	// Tools are the tools offered, the loop's status tool included.
	Tools []toolset.Declared
	// Items is the conversation to send, in the provider's wire format:
	// the whole conversation, or with Chain only what came after it.
	Items []json.RawMessage
	// Chain names the provider-side conversation that Items continue
	// (Responses' previous_response_id), "" for none.
	Chain string
	// Text, when set, asks for a streamed reply: it is called with every
	// text delta as it arrives.
	Text func(delta string)
	// Ready, when set on a streamed request, is called with each tool
	// call as soon as the stream says its arguments are complete, before
	// the reply ends (Responses' response.output_item.done, Anthropic's
	// content_block_stop, a Gemini chunk's whole functionCall), with the
	// id of the response that carries it. Reply.Calls holds the same
	// call, with the same id and arguments. A provider that cannot tell
	// never calls it. It must not block.
	Ready func(responseID string, c ToolCall)
}

// Ending says how a reply ended when it did not end normally.
type Ending string

// The endings. A reply that ended otherwise than normally ends the run
// with the same status; its calls are not run.
const (
	EndNormal     Ending = ""           // a final message, or tool calls
	EndIncomplete Ending = "incomplete" // cut short: output token limit, context window
	EndRefused    Ending = "refused"    // the model or a content filter refused
	EndFailed     Ending = "failed"     // the provider reports the response failed
)

// Reply is the model's answer to one Request.
type Reply struct {
	ID           string
	Model        string
	InputTokens  int64
	OutputTokens int64
	// Text is the reply's text, "" for none.
	Text string
	// Calls are the tool calls, in order, with their arguments complete.
	Calls []ToolCall
	// Items is the reply as conversation items, to send back with the
	// next request when the loop keeps the conversation (Chain "").
	Items []json.RawMessage
	// Chain, when set, is the provider-side conversation the next request
	// continues; the loop then sends only the items that came after.
	Chain string
	// End says how the reply ended; Reason is the provider's word for it
	// (e.g. "max_tokens", "content_filter", or the API's error code).
	End    Ending
	Reason string
	// Err, on a reply that ended EndFailed because the API reported an
	// error (inside a stream, or as a failed response), is that error, an
	// *APIError whose Code is Reason. The loop ends the run StatusFailed
	// and returns it.
	Err error
	// Continue asks for another turn with nothing added: the provider
	// paused a long turn (Anthropic's pause_turn).
	Continue bool
}

// ToolCall is one tool call the model made (guard.Call is a dispatch of one).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
	// Kind is the adapter's own tag for the call's shape, handed back in
	// its Output (e.g. "custom" for a free-form custom tool call).
	Kind string
	// Answer, when set, is the model result the call gets without being
	// run: a call that is not a function call, one the provider marked
	// incomplete, or a namespaced call (contract section 3).
	Answer *guard.Result
}

// Output answers one call.
type Output struct {
	CallID string
	// Name is the tool the call named (ToolCall.Name), for APIs whose tool
	// results name it (Gemini's functionResponse).
	Name string
	Kind string
	// Result is the tool-model-result-v2 JSON.
	Result string
	// OK reports whether the result's code is OK.
	OK bool
}

// Provider is one model API as the agent loop uses it.
type Provider interface {
	// Info names the adapter and the model.
	Info() Info
	// UserItem is the conversation item of the user's input.
	UserItem(text string) json.RawMessage
	// OutputItems are the conversation items answering a reply's calls,
	// in the order given.
	OutputItems(outs []Output) []json.RawMessage
	// Turn asks the model for one reply.
	Turn(ctx context.Context, req Request) (*Reply, error)
}

// APIError is an error reply of a provider's API, wrapping the SDK's own
// error (errors.As still finds it) when there is one.
type APIError struct {
	// StatusCode is the HTTP status; an error reported inside a stream has
	// the stream's (200).
	StatusCode int
	// Code is the API's error code or type (e.g. "insufficient_quota",
	// "overloaded_error"), "" when it gave none.
	Code string
	// Message is the API's message, "" when it gave none.
	Message string
	// Err is the SDK's error, nil when the SDK reported none (an error
	// event the SDK read as an event).
	Err error
}

func (e *APIError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	msg := fmt.Sprintf("provider API error %d", e.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the SDK's error.
func (e *APIError) Unwrap() error { return e.Err }

// ErrorType names an error for telemetry: "canceled",
// "deadline_exceeded", the API's code for an APIError reported inside a
// stream (status 200), "http_<status>" for another APIError, else "_OTHER".
func ErrorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode == 200 && apiErr.Code != "" {
			return apiErr.Code
		}
		return fmt.Sprintf("http_%d", apiErr.StatusCode)
	}
	return "_OTHER"
}
