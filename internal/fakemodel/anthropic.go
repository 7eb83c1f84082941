// The Anthropic Messages encoder: [NewAnthropic].
//
// A [AnthropicServer] is a real HTTP server (net/http/httptest) playing a scripted
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
// through option.WithBaseURL([AnthropicServer.URL]); nothing is mocked above HTTP.
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
// ([AnthropicSignature]; the server signs statelessly). A request without an API
// key (X-Api-Key, or an Authorization bearer) gets 401.
//
// Once the script is exhausted every request is answered with the text
// [ExhaustedText].

package fakemodel

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// StopDetails is a refusal's stop_details.
type StopDetails struct {
	// Category is the policy category ("cyber", "bio", ...), "" for
	// null.
	Category string
	// Explanation is the human-readable explanation, "" for null.
	Explanation string
}

// Signature is the signature the server gives a thinking block, and
// requires it back with: the text's SHA-256, base64-encoded.
func AnthropicSignature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Request is a request the server received, decoded.
type AnthropicRequest struct {
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
	Messages []AnthropicMessage
	// Tools are the declared tools' raw JSON.
	Tools []json.RawMessage
	// Thinking is the thinking parameter's type ("enabled", "adaptive",
	// "disabled"), "" when absent.
	Thinking string
	// StatusCode is the status the server answered.
	StatusCode int
}

// Message is one decoded message of a request.
type AnthropicMessage struct {
	Role string
	// Text is the concatenated text blocks (or the content string).
	Text        string
	ToolUses    []Call
	ToolResults []AnthropicToolResult
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
type AnthropicToolResult struct {
	ToolUseID string
	// Content is the concatenated text of its content.
	Content string
	IsError bool
}

// ToolResults returns the tool_result blocks of the last message.
func (r AnthropicRequest) ToolResults() []AnthropicToolResult {
	if len(r.Messages) == 0 {
		return nil
	}
	return r.Messages[len(r.Messages)-1].ToolResults
}

// ToolNames returns the declared tools' names, in order.
func (r AnthropicRequest) ToolNames() []string {
	var names []string
	for _, raw := range r.Tools {
		var t struct{ Name string }
		_ = json.Unmarshal(raw, &t)
		names = append(names, t.Name)
	}
	return names
}

// AnthropicServer is a fake Messages server. It is safe for concurrent use. Close,
// URL, Enqueue, Remaining and Requests (in order, rejected ones too) are
// the methods every fake server has.
type AnthropicServer struct{ *antServer }

// antServer is the fake servers' core, embedded so that its methods are
// Server's own.
type antServer = server[AnthropicRequest]

// NewAnthropic starts a server playing turns in order; Close it when done.
func NewAnthropic(turns ...Turn) *AnthropicServer {
	return &AnthropicServer{newServer(turns, antMessages)}
}

// BaseURL returns the base URL to pass to option.WithBaseURL: the server
// root, as the real "https://api.anthropic.com" is; the SDK posts to
// /v1/messages under it.
func (s *AnthropicServer) BaseURL() string { return s.URL() }

// antMessages is the Messages API wire format.
var antMessages = wireFormat[AnthropicRequest]{Decode: antDecode, Fail: antFail, Reply: antReply,
	Mark: func(r *AnthropicRequest, status, _ int) { r.StatusCode = status }}

// antDecode decodes a request, and refuses it as the real API does: a wrong
// route, no API key, a body that is not JSON, a malformed request.
func antDecode(x *exchange[AnthropicRequest]) (AnthropicRequest, *refusal) {
	r := x.R
	req := AnthropicRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: x.Body}
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		return req, antRefusal(http.StatusNotFound, "not_found_error", "Not found")
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.TrimSpace(r.Header.Get("X-Api-Key")) == "" && strings.TrimSpace(bearer) == "" {
		return req, antRefusal(http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	}
	maxTokens, err := antDecodeBody(x.Body, &req)
	if err != nil {
		return req, antRefusal(http.StatusBadRequest, "invalid_request_error", err.Error())
	}
	if msg := antCheck(req, maxTokens); msg != "" {
		return req, antRefusal(http.StatusBadRequest, "invalid_request_error", msg)
	}
	return req, nil
}

// antFail returns the error a turn answers with: its Status (429 a
// rate_limit_error, else an api_error), or its StreamError for a request
// that does not stream (529 when overloaded, else 500).
func antFail(t Turn, req AnthropicRequest) *refusal {
	switch {
	case t.Status == http.StatusTooManyRequests:
		return antRefusal(t.Status, "rate_limit_error", http.StatusText(t.Status))
	case t.Status != 0:
		return antRefusal(t.Status, "api_error", http.StatusText(t.Status))
	case t.StreamError == nil || req.Stream:
		return nil
	case t.StreamError.Type == "overloaded_error":
		return antRefusal(529, t.StreamError.Type, t.StreamError.Message)
	}
	return antRefusal(http.StatusInternalServerError, t.StreamError.Type, t.StreamError.Message)
}

// antReply answers with the turn's message, streamed or not.
func antReply(x *exchange[AnthropicRequest], t Turn, req AnthropicRequest) {
	m := antNewMessage(x, t, req.Model)
	x.Reply(&req, t.Gzip, req.Stream, m, func(sse *eventStream) { antWriteStream(sse, m, t) })
}

// antRefusal is an Anthropic-style error reply, which the SDK retries at
// once.
func antRefusal(status int, typ, msg string) *refusal {
	return &refusal{Status: status, Header: retryNow(),
		Body: map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}}
}

// antCheck returns the error message the real API gives for a malformed
// request, or "".
func antCheck(req AnthropicRequest, maxTokens int) string {
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
			if th.Signature != AnthropicSignature(th.Thinking) {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
		if req.Thinking == "enabled" && m.Role == "assistant" && len(m.ToolUses) > 0 && i == antLastAssistant(req.Messages) &&
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
			open[c.CallID] = true
		}
	}
	if len(open) > 0 {
		return "`tool_use` ids were found without `tool_result` blocks immediately after"
	}
	return ""
}

// antLastAssistant returns the index of the last assistant message, -1 for
// none.
func antLastAssistant(msgs []AnthropicMessage) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return i
		}
	}
	return -1
}

func antDecodeBody(body []byte, req *AnthropicRequest) (int, error) {
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
	req.System, _ = contentText(w.System)
	for _, m := range w.Messages {
		msg := AnthropicMessage{Role: m.Role}
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
				msg.ToolUses = append(msg.ToolUses, Call{CallID: b.ID, Name: b.Name, Arguments: string(b.Input), Toolset: b.ToolsetName})
			case "tool_result":
				content, _ := contentText(b.Content)
				msg.ToolResults = append(msg.ToolResults, AnthropicToolResult{ToolUseID: b.ToolUseID, Content: content, IsError: b.IsError})
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	return w.MaxTokens, nil
}

// Wire format.

type antMessage struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	StopDetails  *antStopDetails   `json:"stop_details"`
	Usage        map[string]int    `json:"usage"`
	blocks       []antBlock
}

type antStopDetails struct {
	Type        string  `json:"type"`
	Category    *string `json:"category"`
	Explanation *string `json:"explanation"`
}

type antBlock struct {
	Type        string          `json:"type"`
	Thinking    *string         `json:"thinking,omitempty"`
	Signature   *string         `json:"signature,omitempty"`
	Text        *string         `json:"text,omitempty"`
	ID          string          `json:"id,omitempty"`
	Name        string          `json:"name,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Caller      *antCaller      `json:"caller,omitempty"`
	ToolsetName string          `json:"toolset_name,omitempty"`
}

// antCaller is who called a tool: "direct", the model itself.
type antCaller struct {
	Type string `json:"type"`
}

func antOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func antNewMessage(x *exchange[AnthropicRequest], t Turn, model string) *antMessage {
	m := &antMessage{ID: x.NewID("msg"), Type: "message", Role: "assistant", Model: model,
		Usage: map[string]int{"input_tokens": 10, "output_tokens": 1 + len(t.Text)/4}}
	if t.Reasoning != "" {
		thinking, sig := t.Reasoning, AnthropicSignature(t.Reasoning)
		m.blocks = append(m.blocks, antBlock{Type: "thinking", Thinking: &thinking, Signature: &sig})
	}
	if t.StopDetails != nil {
		m.StopDetails = &antStopDetails{Type: "refusal", Category: antOrNull(t.StopDetails.Category), Explanation: antOrNull(t.StopDetails.Explanation)}
	}
	if t.Text != "" {
		text := t.Text
		m.blocks = append(m.blocks, antBlock{Type: "text", Text: &text})
	}
	for _, c := range t.Calls {
		id := c.CallID
		if id == "" {
			id = x.NewID("toolu")
		}
		input := c.Arguments
		if input == "" {
			input = "{}"
		}
		m.blocks = append(m.blocks, antBlock{Type: "tool_use", ID: id, Name: c.Name, Input: json.RawMessage(input),
			Caller: &antCaller{Type: "direct"}, ToolsetName: c.Toolset})
	}
	stop := t.Finish
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

// antWriteStream writes the message as the Messages API streams it: a ping
// after the first block starts, thinking as thinking_delta pieces and a
// signature_delta, text word by word, a tool_use input from an empty
// first piece, then in pieces; or, with t.StreamError, an error event
// after the first block's first delta.
func antWriteStream(sse *eventStream, m *antMessage, t Turn) {
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		if !t.Spaced {
			sse.Event(typ, fields)
			return
		}
		b, _ := json.Marshal(fields)
		sse.Event(typ, spaced(b)+"   ")
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
			event("content_block_start", map[string]any{"index": i, "content_block": antBlock{Type: "thinking", Thinking: &empty, Signature: &empty}})
			for _, part := range chunks(*b.Thinking) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": part})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": *b.Signature})
		case "text":
			empty := ""
			event("content_block_start", map[string]any{"index": i, "content_block": antBlock{Type: "text", Text: &empty}})
			for _, part := range chunks(*b.Text) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
			}
		case "tool_use":
			open := b
			open.Input = json.RawMessage("{}")
			event("content_block_start", map[string]any{"index": i, "content_block": open})
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range pieces(string(b.Input), 4) {
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

// Results returns the tool results of ToolResults: each tool_result
// block's tool_use_id and text.
func (r AnthropicRequest) Results() []Result {
	var out []Result
	for _, t := range r.ToolResults() {
		out = append(out, Result{CallID: t.ToolUseID, Output: t.Content})
	}
	return out
}
