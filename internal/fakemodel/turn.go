package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// ExhaustedText is the text of the reply every server answers with once
// its script is exhausted (or a Respond function returns nil), so that an
// agent loop ends.
const ExhaustedText = "done"

// Turn is one scripted reply of a fake model, the same for every wire
// format; each server encodes it in its API's.
//
// Exactly one reply kind applies, checked in this order: Respond, Status,
// then a completed reply holding Reasoning (if set), Text (if set) and one
// tool call per entry of Calls, in order. The fields after Respond apply
// to one wire format only, and the others ignore them.
type Turn struct {
	// Text is the assistant's text. With Calls it comes first, as real
	// models place commentary before tool calls.
	Text string
	// Calls are the tool calls of the reply, in order.
	Calls []Call
	// Reasoning, if set, is the model's reasoning before the rest: a
	// reasoning item (OpenAI, sealed into encrypted_content when the
	// request includes "reasoning.encrypted_content"), reasoning_content
	// (Chat Completions, as Z.ai, DeepSeek, Kimi and vLLM send it), a
	// thinking block signed with [AnthropicSignature], a thought part
	// (Gemini, includeThoughts).
	Reasoning string
	// Refusal, if set, is a refusal in the assistant message, after its
	// text (OpenAI, Chat Completions).
	Refusal string
	// Finish overrides how the reply ends: Chat Completions'
	// finish_reason ("length", "content_filter", ...; by default
	// "tool_calls" with calls, else "stop"), Anthropic's stop_reason
	// ("max_tokens", "refusal", "pause_turn", ...; by default "tool_use"
	// with calls, else "end_turn"), Gemini's finishReason ("MAX_TOKENS",
	// "SAFETY", "MALFORMED_FUNCTION_CALL", ...; by default "STOP"), the
	// OpenAI response's incomplete_details.reason ("max_output_tokens":
	// the response ends with status "incomplete", a stream with
	// response.incomplete).
	Finish string
	// Status, if non-zero, answers with this HTTP status and an error
	// body in the API's format instead of a reply (e.g. 429 or 500; the
	// reply carries retry-after-ms 0 where the SDK honours it, so that a
	// retry comes at once and consumes the next turn).
	Status int
	// Error overrides the error body's fields sent with Status (OpenAI);
	// unset fields default from the status.
	Error *Error
	// StreamError, if set, makes a stream fail after it started, with an
	// error event or chunk in the API's format carrying it (where exactly
	// is each format's own; see the servers); a request that does not
	// stream gets it as an error reply (OpenAI: a failed response).
	StreamError *Error
	// Header holds reply headers; they replace the server's of the same
	// name (e.g. "retry-after-ms" or "x-should-retry").
	Header http.Header
	// Gzip sends the body gzip-compressed, with Content-Encoding: gzip.
	Gzip bool
	// Hold, if set, holds a stream open after its content until it is
	// closed, then sends what ends the reply: a test's way to keep a reply
	// streaming while something else happens. A request that ends first
	// ends the stream there.
	Hold <-chan struct{}
	// Respond, if set, decides the reply from the request; the turn it
	// returns is used in place of this one (its own Respond is ignored),
	// nil for the exhausted reply ([ExhaustedText]). It is called without
	// the server's lock held, so it may call the server's methods.
	Respond func(req Request) *Turn

	// Empty makes the reply a response without output items, whatever
	// Text and Calls say (OpenAI).
	Empty bool
	// Summary, if set, is the reasoning item's summary text (the item is
	// there even without Reasoning), streamed as reasoning summary events
	// (OpenAI).
	Summary string
	// Commentary gives the assistant message the phase "commentary": a
	// preamble to the calls after it, not a final answer (OpenAI).
	Commentary bool
	// ErrorFlat sends StreamError in the documented flat shape,
	// {"code","message","param"}, ending the stream with it (OpenAI).
	ErrorFlat bool
	// Shape says how a streamed reply is cut into chunks (Chat
	// Completions).
	Shape ChatShape
	// StopDetails, if set, is the message's stop_details (with Finish
	// "refusal"); otherwise it is null (Anthropic).
	StopDetails *StopDetails
	// Spaced writes each event's data JSON with white space inside, as
	// some servers and proxies do: after every colon and comma, inside
	// every brace and bracket (an empty input keeps a space inside), and
	// at the end (Anthropic).
	Spaced bool
	// FinishMessage, if set, is the candidate's finishMessage (Gemini).
	FinishMessage string
	// BlockReason, if set, answers with no candidates and this
	// promptFeedback.blockReason, a blocked prompt (Gemini).
	BlockReason string
	// SignText signs the last text part too, and in a stream ends with an
	// empty text part carrying a signature, as Gemini 3 does (Gemini).
	SignText bool
	// NoResponseID leaves out the responseId, as one recorded stream did
	// (Gemini).
	NoResponseID bool
	// OneChunk streams every call in one chunk (Gemini).
	OneChunk bool
	// StreamArgs streams each call's arguments as partialArgs pieces (top
	// level members only; strings in two pieces) (Gemini).
	StreamArgs bool
	// Pace, if set, is the pause before each chunk of a stream after the
	// first, as a model takes time to write (Gemini).
	Pace time.Duration
}

// Call is one tool call of a scripted reply.
type Call struct {
	// Name is the tool's (function's) name.
	Name string
	// Arguments is the arguments' JSON text, sent as the API sends it
	// (OpenAI and Chat Completions: verbatim, as a string, so it may be
	// malformed on purpose; Anthropic: the input, "{}" when empty;
	// Gemini: the args object, "" for none).
	Arguments string
	// CallID is the call's id; when empty a fresh one ("call_…",
	// "toolu_…"), except for Gemini, which then sends none, as Gemini 2.x
	// and Vertex AI do.
	CallID string
	// Custom makes it a custom (free-form) tool call whose input is
	// Arguments (OpenAI, Chat Completions).
	Custom bool
	// Namespace, if set, is the function call's namespace (OpenAI).
	Namespace string
	// Status, if set, is the function call's status ("in_progress",
	// "incomplete"); default "completed" (OpenAI).
	Status string
	// Toolset, if set, is the tool_use block's toolset_name (Anthropic).
	Toolset string
}

// Error is an error a server answers with, in its API's format: OpenAI's
// and Chat Completions' {"error":{"message","type","param","code"}} (an
// empty Param or Code is null), Anthropic's
// {"type":"error","error":{"type","message"}}, Gemini's
// {"error":{"code","message","status"}} (Code the HTTP status as a
// number, Type the status).
type Error struct {
	// Message is the human-readable error message.
	Message string
	// Type is the error type, e.g. "server_error", "overloaded_error",
	// "UNAVAILABLE".
	Type string
	// Param names the offending request parameter, if any.
	Param string
	// Code is the machine-readable error code, e.g.
	// "rate_limit_exceeded", or Gemini's HTTP status ("503").
	Code string
}

// Request is a request a server received, decoded, as a Turn's Respond
// sees it: an [OpenAIRequest], [ChatRequest], [AnthropicRequest] or
// [GeminiRequest], whatever its wire format.
type Request interface {
	// ToolNames returns the declared tools' names, in order.
	ToolNames() []string
	// Results returns the tool results the request answers the last
	// reply's calls with, in order.
	Results() []Result
}

// Result is a tool's result, as a request sends it back to the model.
type Result struct {
	// CallID is the id of the call it answers ("" when the API sends
	// none).
	CallID string
	// Output is the result's text (Gemini: the response's JSON).
	Output string
}

// ModelResult decodes the output as the tool-model-result-v2 object a
// toolguard loop sends back.
func (o Result) ModelResult() (guard.Result, error) {
	var r guard.Result
	if err := json.Unmarshal([]byte(o.Output), &r); err != nil {
		return r, fmt.Errorf("fakemodel: the output for %s is not a model result: %v: %s", o.CallID, err, o.Output)
	}
	return r, nil
}
