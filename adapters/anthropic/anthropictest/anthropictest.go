// Package anthropictest provides a fake Anthropic Messages server for tests
// and offline examples.
//
// A [Server] is a real HTTP server (net/http/httptest) playing a scripted
// model: every POST to /v1/messages consumes the next [Turn] and is
// answered in the real wire format, a message object or, for "stream":
// true, the server-sent events message_start, a ping, content_block_start,
// content_block_delta (thinking_delta and a signature_delta, text_delta
// word by word, input_json_delta from an empty first piece, then in
// pieces), content_block_stop, message_delta (with stop_details) and
// message_stop, as the API sends them: tool_use blocks start with their
// caller, and a [Turn] can send an error event mid-stream
// (Turn.StreamError), data JSON with white space inside (Turn.Spaced), or a
// gzip body (Turn.Gzip). The real anthropic-sdk-go client talks to it
// through option.WithBaseURL([Server.URL]); nothing is mocked above HTTP.
//
// The server keeps nothing between requests, as the real API does: every
// request carries the whole conversation and is checked as the real API
// checks it. A request is rejected with 400 and an Anthropic-style error
// body, without consuming a turn, when it has no model, no max_tokens or no
// messages, when an assistant message's tool_use blocks are not each
// answered by a tool_result block in the user message right after it, or
// when a tool_result answers no tool_use of the message before. With
// thinking enabled, as the real API, it also rejects a tool-use turn whose
// assistant message does not start with its thinking block, and any
// thinking block whose signature is not the one the server gave it
// ([Signature]; the server signs statelessly). A request without an API
// key (X-Api-Key, or an Authorization bearer) gets 401.
//
// Once the script is exhausted every request is answered with the text
// [ExhaustedText].
package anthropictest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolguard/toolguard/adapters/internal/fakeapi"
)

// ExhaustedText is the reply once every scripted turn has been consumed.
const ExhaustedText = "done"

// Turn is one scripted reply of the fake model.
type Turn struct {
	// Thinking, if set, is a thinking block before the others, signed
	// with [Signature].
	Thinking string
	// Text is a text block; with Calls it comes first.
	Text string
	// Calls are tool_use blocks, in order.
	Calls []Call
	// StopReason overrides stop_reason ("max_tokens", "refusal",
	// "pause_turn", ...); by default "tool_use" with calls, else
	// "end_turn".
	StopReason string
	// StopDetails, if set, is the message's stop_details (with
	// StopReason "refusal"); otherwise it is null.
	StopDetails *StopDetails
	// Status, if non-zero, answers with this HTTP status and an error body
	// instead.
	Status int
	// StreamError, if set, ends a streamed reply with an error event
	// after the message started and its first block's first delta, as the
	// API reports an overload mid-stream; a request that does not stream
	// gets it as an error reply with status 529 (overloaded_error) or 500.
	StreamError *StreamError
	// Spaced writes each event's data JSON with white space inside, as
	// some servers and proxies do: after every colon and comma, inside
	// every brace and bracket (an empty input keeps a space inside), and at the end.
	Spaced bool
	// Gzip sends the body gzip-compressed, with Content-Encoding: gzip.
	Gzip bool
	// Hold, if set, holds a stream open after its content blocks until it
	// is closed, then sends message_delta and message_stop: a test's way to
	// keep a reply streaming while something else happens.
	// A request that ends first ends the stream there.
	Hold <-chan struct{}
	// Respond, if set, decides the reply from the request; its result is
	// used in place of this turn (nil: the exhausted reply).
	Respond func(req Request) *Turn
}

// StopDetails is a refusal's stop_details.
type StopDetails struct {
	// Category is the policy category ("cyber", "bio", ...), "" for
	// null.
	Category string
	// Explanation is the human-readable explanation, "" for null.
	Explanation string
}

// StreamError is an error event inside a stream:
// {"type":"error","error":{"type":Type,"message":Message}}.
type StreamError struct {
	// Type is the error type, e.g. "overloaded_error" or "api_error".
	Type string
	// Message is the error's message.
	Message string
}

// Signature is the signature the server gives a thinking block, and
// requires it back with: the text's SHA-256, base64-encoded.
func Signature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Call is one tool_use block.
type Call struct {
	// Name is the tool's name.
	Name string
	// Input is the input's JSON text ("{}" when empty).
	Input string
	// ID is the tool_use id; a fresh "toolu_…" id when empty.
	ID string
	// Toolset, if set, is the block's toolset_name.
	Toolset string
}

// Request is a request the server received, decoded.
type Request struct {
	// Path is the URL path, "/v1/messages" unless the request was
	// refused for its route.
	Path string
	// Header is the request header: X-Api-Key (or an Authorization
	// bearer) carries the key, anthropic-version and anthropic-beta the
	// API's version and betas.
	Header http.Header
	// Body is the raw Messages request.
	Body json.RawMessage
	// Model is the "model" parameter.
	Model string
	// Stream reports whether "stream": true was requested.
	Stream bool
	// System is the system prompt: the string, or its text blocks
	// concatenated.
	System string
	// Messages are the conversation, in order.
	Messages []Message
	// Tools are the declared tools' raw JSON.
	Tools []json.RawMessage
	// Thinking is the thinking parameter's type ("enabled", "adaptive",
	// "disabled"), "" when absent.
	Thinking string
	// StatusCode is the status the server answered.
	StatusCode int
}

// Message is one decoded message of a request.
type Message struct {
	Role string
	// Text is the concatenated text blocks (or the content string).
	Text        string
	ToolUses    []Call
	ToolResults []ToolResult
	// Thinking are the thinking blocks, in order.
	Thinking []ThinkingBlock
	// Types are the content blocks' types, in order.
	Types []string
}

// ThinkingBlock is one thinking block of a request.
type ThinkingBlock struct {
	// Thinking is the block's text.
	Thinking string
	// Signature is its signature, as sent.
	Signature string
}

// ToolResult is one tool_result block.
type ToolResult struct {
	ToolUseID string
	// Content is the concatenated text of its content.
	Content string
	IsError bool
}

// ToolResults returns the tool_result blocks of the last message.
func (r Request) ToolResults() []ToolResult {
	if len(r.Messages) == 0 {
		return nil
	}
	return r.Messages[len(r.Messages)-1].ToolResults
}

// ToolNames returns the declared tools' names, in order.
func (r Request) ToolNames() []string {
	var names []string
	for _, raw := range r.Tools {
		var t struct{ Name string }
		_ = json.Unmarshal(raw, &t)
		names = append(names, t.Name)
	}
	return names
}

// Server is a fake Messages server. It is safe for concurrent use. Close,
// URL, Enqueue, Remaining and Requests (in order, rejected ones too) are
// the methods every fake server has.
type Server struct{ *server }

// server is the fake servers' core, embedded so that its methods are
// Server's own.
type server = fakeapi.Server[Turn, Request]

// NewServer starts a server playing turns in order; Close it when done.
func NewServer(turns ...Turn) *Server { return &Server{fakeapi.NewServer(turns, messages)} }

// BaseURL returns the base URL to pass to option.WithBaseURL: the server
// root, as the real "https://api.anthropic.com" is; the SDK posts to
// /v1/messages under it.
func (s *Server) BaseURL() string { return s.URL() }

// messages is the Messages API wire format.
var messages = fakeapi.Wire[Turn, Request]{Decode: decode, Fail: fail, Reply: reply, Exhausted: Turn{Text: ExhaustedText},
	Respond: func(t Turn) func(Request) *Turn { return t.Respond }, Mark: func(r *Request, status, _ int) { r.StatusCode = status }}

// decode decodes a request, and refuses it as the real API does: a wrong
// route, no API key, a body that is not JSON, a malformed request.
func decode(x *fakeapi.Exchange[Turn, Request]) (Request, *fakeapi.Refusal) {
	r := x.R
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: x.Body}
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		return req, refusal(http.StatusNotFound, "not_found_error", "Not found")
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.TrimSpace(r.Header.Get("X-Api-Key")) == "" && strings.TrimSpace(bearer) == "" {
		return req, refusal(http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	}
	maxTokens, err := decodeBody(x.Body, &req)
	if err != nil {
		return req, refusal(http.StatusBadRequest, "invalid_request_error", err.Error())
	}
	if msg := check(req, maxTokens); msg != "" {
		return req, refusal(http.StatusBadRequest, "invalid_request_error", msg)
	}
	return req, nil
}

// fail returns the error a turn answers with: its Status (429 a
// rate_limit_error, else an api_error), or its StreamError for a request
// that does not stream (529 when overloaded, else 500).
func fail(t Turn, req Request) *fakeapi.Refusal {
	switch {
	case t.Status == http.StatusTooManyRequests:
		return refusal(t.Status, "rate_limit_error", http.StatusText(t.Status))
	case t.Status != 0:
		return refusal(t.Status, "api_error", http.StatusText(t.Status))
	case t.StreamError == nil || req.Stream:
		return nil
	case t.StreamError.Type == "overloaded_error":
		return refusal(529, t.StreamError.Type, t.StreamError.Message)
	}
	return refusal(http.StatusInternalServerError, t.StreamError.Type, t.StreamError.Message)
}

// reply answers with the turn's message, streamed or not.
func reply(x *fakeapi.Exchange[Turn, Request], t Turn, req Request) {
	m := newMessage(x, t, req.Model)
	x.Reply(&req, t.Gzip, req.Stream, m, func(sse *fakeapi.SSE) { writeStream(sse, m, t) })
}

// refusal is an Anthropic-style error reply, which the SDK retries at
// once.
func refusal(status int, typ, msg string) *fakeapi.Refusal {
	return &fakeapi.Refusal{Status: status, Header: fakeapi.RetryNow(),
		Body: map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}}
}

// check returns the error message the real API gives for a malformed
// request, or "".
func check(req Request, maxTokens int) string {
	switch {
	case req.Model == "":
		return "model: Field required"
	case maxTokens <= 0:
		return "max_tokens: Field required"
	case len(req.Messages) == 0:
		return "messages: at least one message is required"
	}
	for i, m := range req.Messages {
		for j, th := range m.Thinking {
			if th.Signature != Signature(th.Thinking) {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
		if req.Thinking == "enabled" && m.Role == "assistant" && len(m.ToolUses) > 0 && i == lastAssistant(req.Messages) &&
			(len(m.Types) == 0 || m.Types[0] != "thinking" && m.Types[0] != "redacted_thinking") {
			first := ""
			if len(m.Types) > 0 {
				first = m.Types[0]
			}
			return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).", i, first)
		}
	}
	var open map[string]bool
	for i, m := range req.Messages {
		for _, tr := range m.ToolResults {
			if !open[tr.ToolUseID] {
				return fmt.Sprintf("messages.%d.content: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, tr.ToolUseID)
			}
			delete(open, tr.ToolUseID)
		}
		if len(open) > 0 {
			return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after", i-1)
		}
		open = map[string]bool{}
		for _, c := range m.ToolUses {
			open[c.ID] = true
		}
	}
	if len(open) > 0 {
		return "`tool_use` ids were found without `tool_result` blocks immediately after"
	}
	return ""
}

// lastAssistant returns the index of the last assistant message, -1 for
// none.
func lastAssistant(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return i
		}
	}
	return -1
}

func decodeBody(body []byte, req *Request) (int, error) {
	var w struct {
		Model     string            `json:"model"`
		MaxTokens int               `json:"max_tokens"`
		Stream    bool              `json:"stream"`
		System    json.RawMessage   `json:"system"`
		Tools     []json.RawMessage `json:"tools"`
		Thinking  struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return 0, err
	}
	req.Model, req.Stream, req.Tools, req.Thinking = w.Model, w.Stream, w.Tools, w.Thinking.Type
	req.System, _ = fakeapi.Text(w.System)
	for _, m := range w.Messages {
		msg := Message{Role: m.Role}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			msg.Text = s
			req.Messages = append(req.Messages, msg)
			continue
		}
		var blocks []struct {
			Type        string          `json:"type"`
			Text        string          `json:"text"`
			ID          string          `json:"id"`
			Name        string          `json:"name"`
			Input       json.RawMessage `json:"input"`
			ToolsetName string          `json:"toolset_name"`
			ToolUseID   string          `json:"tool_use_id"`
			Content     json.RawMessage `json:"content"`
			IsError     bool            `json:"is_error"`
			Thinking    string          `json:"thinking"`
			Signature   string          `json:"signature"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return 0, err
		}
		for _, b := range blocks {
			msg.Types = append(msg.Types, b.Type)
			switch b.Type {
			case "thinking":
				msg.Thinking = append(msg.Thinking, ThinkingBlock{Thinking: b.Thinking, Signature: b.Signature})
			case "text":
				msg.Text += b.Text
			case "tool_use":
				msg.ToolUses = append(msg.ToolUses, Call{ID: b.ID, Name: b.Name, Input: string(b.Input), Toolset: b.ToolsetName})
			case "tool_result":
				content, _ := fakeapi.Text(b.Content)
				msg.ToolResults = append(msg.ToolResults, ToolResult{ToolUseID: b.ToolUseID, Content: content, IsError: b.IsError})
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	return w.MaxTokens, nil
}

// Wire format.

type message struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	StopDetails  *stopDetails      `json:"stop_details"`
	Usage        map[string]int    `json:"usage"`
	blocks       []block
}

type stopDetails struct {
	Type        string  `json:"type"`
	Category    *string `json:"category"`
	Explanation *string `json:"explanation"`
}

type block struct {
	Type        string          `json:"type"`
	Thinking    *string         `json:"thinking,omitempty"`
	Signature   *string         `json:"signature,omitempty"`
	Text        *string         `json:"text,omitempty"`
	ID          string          `json:"id,omitempty"`
	Name        string          `json:"name,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Caller      *caller         `json:"caller,omitempty"`
	ToolsetName string          `json:"toolset_name,omitempty"`
}

// caller is who called a tool: "direct", the model itself.
type caller struct {
	Type string `json:"type"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newMessage(x *fakeapi.Exchange[Turn, Request], t Turn, model string) *message {
	m := &message{ID: x.NewID("msg"), Type: "message", Role: "assistant", Model: model,
		Usage: map[string]int{"input_tokens": 10, "output_tokens": 1 + len(t.Text)/4}}
	if t.Thinking != "" {
		thinking, sig := t.Thinking, Signature(t.Thinking)
		m.blocks = append(m.blocks, block{Type: "thinking", Thinking: &thinking, Signature: &sig})
	}
	if t.StopDetails != nil {
		m.StopDetails = &stopDetails{Type: "refusal", Category: orNull(t.StopDetails.Category), Explanation: orNull(t.StopDetails.Explanation)}
	}
	if t.Text != "" {
		text := t.Text
		m.blocks = append(m.blocks, block{Type: "text", Text: &text})
	}
	for _, c := range t.Calls {
		id := c.ID
		if id == "" {
			id = x.NewID("toolu")
		}
		input := c.Input
		if input == "" {
			input = "{}"
		}
		m.blocks = append(m.blocks, block{Type: "tool_use", ID: id, Name: c.Name, Input: json.RawMessage(input),
			Caller: &caller{Type: "direct"}, ToolsetName: c.Toolset})
	}
	stop := t.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(t.Calls) > 0 {
			stop = "tool_use"
		}
	}
	m.StopReason = &stop
	m.Content = make([]json.RawMessage, 0, len(m.blocks))
	for _, b := range m.blocks {
		raw, _ := json.Marshal(b)
		m.Content = append(m.Content, raw)
	}
	return m
}

// writeStream writes the message as the Messages API streams it: a ping
// after the first block starts, thinking as thinking_delta pieces and a
// signature_delta, text word by word, a tool_use input from an empty
// first piece, then in pieces; or, with t.StreamError, an error event
// after the first block's first delta.
func writeStream(sse *fakeapi.SSE, m *message, t Turn) {
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		if !t.Spaced {
			sse.Event(typ, fields)
			return
		}
		b, _ := json.Marshal(fields)
		sse.Event(typ, fakeapi.Spaced(b)+"   ")
	}
	start := *m
	start.Content, start.StopReason, start.StopDetails = []json.RawMessage{}, nil, nil
	start.Usage = map[string]int{"input_tokens": m.Usage["input_tokens"], "output_tokens": 1}
	event("message_start", map[string]any{"message": start})
	failed := func() bool {
		if t.StreamError == nil {
			return false
		}
		event("error", map[string]any{"error": map[string]any{"type": t.StreamError.Type, "message": t.StreamError.Message}})
		return true
	}
	if len(m.blocks) == 0 && failed() {
		return
	}
	for i, b := range m.blocks {
		delta := func(d map[string]any) {
			event("content_block_delta", map[string]any{"index": i, "delta": d})
		}
		var deltas []map[string]any
		switch b.Type {
		case "thinking":
			empty := ""
			event("content_block_start", map[string]any{"index": i, "content_block": block{Type: "thinking", Thinking: &empty, Signature: &empty}})
			for _, part := range fakeapi.Chunks(*b.Thinking) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": part})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": *b.Signature})
		case "text":
			empty := ""
			event("content_block_start", map[string]any{"index": i, "content_block": block{Type: "text", Text: &empty}})
			for _, part := range fakeapi.Chunks(*b.Text) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
			}
		case "tool_use":
			open := b
			open.Input = json.RawMessage("{}")
			event("content_block_start", map[string]any{"index": i, "content_block": open})
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range fakeapi.Pieces(string(b.Input), 4) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		if i == 0 {
			event("ping", map[string]any{})
		}
		for j, d := range deltas {
			delta(d)
			if i == 0 && j == 0 && failed() {
				return
			}
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	if !sse.Hold(t.Hold) {
		return
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": *m.StopReason, "stop_sequence": nil, "stop_details": m.StopDetails},
		"usage": map[string]int{"output_tokens": m.Usage["output_tokens"]}})
	event("message_stop", map[string]any{})
}
