// The OpenAI Chat Completions encoder: [NewChat].
//
// A [ChatServer] is a real HTTP server (net/http/httptest) playing a scripted
// model: every POST to /v1/chat/completions consumes the next [Turn] and is
// answered in the real wire format, a chat.completion object or, for
// "stream": true, chat.completion.chunk server-sent events ending in
// "data: [DONE]": the role, reasoning_content and content word by word, a
// refusal in pieces, each call's id and name and then its arguments in
// pieces, the finish reason, and the usage in a chunk of its own. A
// [Turn]'s Shape cuts the chunks as other servers do (a null first
// content, the role in the first call's delta, whole calls in one chunk,
// usage null on every chunk or on the finish chunk too), StreamError sends
// an error chunk mid-stream, and Gzip compresses the body. The real
// openai-go client talks to it through option.WithBaseURL([ChatServer.BaseURL]);
// nothing is mocked above HTTP.
//
// The server keeps nothing between requests, as the real API does: every
// request must carry the whole conversation, and it is checked like the
// real API checks it. A request is rejected with 400 and an OpenAI-style
// error body, without consuming a turn, when it has no model or no
// messages, when an assistant message's tool_calls are not each answered
// by a following role "tool" message, or when a tool message answers no
// tool call before it. A request without a bearer key gets 401.
//
// Once the script is exhausted every request is answered with the
// assistant text [ExhaustedText].

package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Shape says how a streamed reply is cut into chunks, as the servers the
// recorded traffic comes from cut them.
type ChatShape struct {
	// NullContent starts with {"role":"assistant","content":null,
	// "refusal":null} (OpenAI) instead of an empty content.
	NullContent bool
	// RoleWithCall sends the role in the first call's delta, without a
	// delta of its own, when the reply starts with a call (xAI).
	RoleWithCall bool
	// WholeCalls sends each call's id, name and whole arguments in one
	// chunk (xAI, Groq, Z.ai).
	WholeCalls bool
	// UsageNull sends "usage": null on every chunk but the usage chunk
	// (OpenAI).
	UsageNull bool
	// UsageOnFinish sends the usage on the finish chunk too, before the
	// usage chunk (Groq; Z.ai sends it there only): the same whole count
	// twice.
	UsageOnFinish bool
}

// Request is a request the server received, decoded.
type ChatRequest struct {
	// Path is the URL path, "/v1/chat/completions" unless the request was
	// refused for its route.
	Path string
	// Header is the request header; Authorization carries the bearer key.
	Header http.Header
	// Body is the raw chat completion request.
	Body json.RawMessage
	// Model is the "model" parameter.
	Model string
	// Stream reports whether "stream": true was requested.
	Stream bool
	// Messages are the conversation, in order.
	Messages []ChatMessage
	// Tools are the declared tools' raw JSON.
	Tools []json.RawMessage
	// StatusCode is the status the server answered.
	StatusCode int
}

// Message is one decoded message of a request.
type ChatMessage struct {
	Role string
	// Content is the content string or the concatenated text parts.
	Content    string
	ToolCallID string
	ToolCalls  []Call
	// ReasoningContent is an assistant message's reasoning_content.
	ReasoningContent string
}

// ToolResults returns the role "tool" messages after the last assistant
// message: the answers to its calls.
func (r ChatRequest) ToolResults() []ChatMessage {
	var out []ChatMessage
	for _, m := range r.Messages {
		switch m.Role {
		case "assistant":
			out = nil
		case "tool":
			out = append(out, m)
		}
	}
	return out
}

// ToolNames returns the declared tools' names, in order.
func (r ChatRequest) ToolNames() []string {
	var names []string
	for _, raw := range r.Tools {
		var t struct {
			Function struct{ Name string } `json:"function"`
		}
		_ = json.Unmarshal(raw, &t)
		names = append(names, t.Function.Name)
	}
	return names
}

// ChatServer is a fake Chat Completions server. It is safe for concurrent use.
// Its Close, URL, Enqueue, Remaining and Requests (received in order,
// rejected ones too) are those of every fake server.
type ChatServer struct{ *chatServer }

// chatServer is the fake servers' core, embedded so that its methods are
// Server's own.
type chatServer = server[ChatRequest]

// NewChat starts a server playing turns in order; Close it when done.
func NewChat(turns ...Turn) *ChatServer { return &ChatServer{newServer(turns, chatChat)} }

// BaseURL returns the base URL to pass to option.WithBaseURL: the server
// root followed by "/v1", as the real "https://api.openai.com/v1/" is.
func (s *ChatServer) BaseURL() string { return s.URL() + "/v1" }

// chatChat is the Chat Completions wire format.
var chatChat = wireFormat[ChatRequest]{Decode: chatDecode, Fail: chatFail, Reply: chatReply,
	Mark: func(r *ChatRequest, status, _ int) { r.StatusCode = status }}

// chatDecode decodes a request, and refuses it as the real API does: a wrong
// route, no bearer key, a body that is not JSON, a malformed
// conversation.
func chatDecode(x *exchange[ChatRequest]) (ChatRequest, *refusal) {
	r := x.R
	req := ChatRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: x.Body}
	invalid := func(status int, msg string) (ChatRequest, *refusal) {
		return req, chatRefusal(status, &Error{Message: msg, Type: "invalid_request_error"})
	}
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		return invalid(http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
	}
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || strings.TrimSpace(key) == "" {
		return invalid(http.StatusUnauthorized, "You didn't provide an API key.")
	}
	if err := chatDecodeBody(x.Body, &req); err != nil {
		return invalid(http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
	}
	if msg := chatCheck(req); msg != "" {
		return invalid(http.StatusBadRequest, msg)
	}
	return req, nil
}

// chatFail returns the error a turn answers with: its Status, or its
// StreamError (500) for a request that does not stream.
func chatFail(t Turn, req ChatRequest) *refusal {
	switch {
	case t.Status != 0:
		return chatRefusal(t.Status, &Error{Message: http.StatusText(t.Status), Type: "invalid_request_error"})
	case t.StreamError != nil && !req.Stream:
		return chatRefusal(http.StatusInternalServerError, t.StreamError)
	}
	return nil
}

// chatReply answers with the turn's completion, streamed or not.
func chatReply(x *exchange[ChatRequest], t Turn, req ChatRequest) {
	c := chatNewCompletion(x, t, req.Model)
	x.Reply(&req, t.Gzip, req.Stream, c, func(sse *eventStream) { chatWriteStream(sse, c, t) })
}

// chatRefusal is an error reply with e's body, which the SDK retries at once.
func chatRefusal(status int, e *Error) *refusal {
	return &refusal{Status: status, Header: retryNow(), Body: chatErrorJSON(e)}
}

// chatCheck returns the error message the real API gives for a malformed
// conversation, or "".
func chatCheck(req ChatRequest) string {
	if req.Model == "" {
		return "you must provide a model parameter"
	}
	if len(req.Messages) == 0 {
		return "'messages' must contain at least one message"
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		switch {
		case m.Role == "tool":
			if !open[m.ToolCallID] {
				return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[%d])", i)
			}
			delete(open, m.ToolCallID)
		case len(open) > 0:
			return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
		}
		for _, c := range m.ToolCalls {
			open[c.CallID] = true
		}
	}
	if len(open) > 0 {
		return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
	}
	return ""
}

// chatErrorJSON is the error body of e.
func chatErrorJSON(e *Error) map[string]any {
	var code any
	if e.Code != "" {
		code = e.Code
	}
	return map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": code}}
}

func chatDecodeBody(body []byte, req *ChatRequest) error {
	var w struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role             string          `json:"role"`
			Content          json.RawMessage `json:"content"`
			ToolCallID       string          `json:"tool_call_id"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
				Custom struct {
					Name  string `json:"name"`
					Input string `json:"input"`
				} `json:"custom"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	req.Model, req.Stream, req.Tools = w.Model, w.Stream, w.Tools
	for _, m := range w.Messages {
		msg := ChatMessage{Role: m.Role, Content: chatText(m.Content), ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		for _, tc := range m.ToolCalls {
			c := Call{CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			if tc.Type == "custom" {
				c = Call{CallID: tc.ID, Name: tc.Custom.Name, Arguments: tc.Custom.Input, Custom: true}
			}
			msg.ToolCalls = append(msg.ToolCalls, c)
		}
		req.Messages = append(req.Messages, msg)
	}
	return nil
}

// chatText returns a content string, or the concatenated text of its parts.
func chatText(raw json.RawMessage) string {
	s, _ := contentText(raw)
	return s
}

// Wire format.

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatWireMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type chatWireMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	Reasoning string         `json:"reasoning_content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    *int          `json:"index,omitempty"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function *chatFunction `json:"function,omitempty"`
	Custom   *chatCustom   `json:"custom,omitempty"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatCustom struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func chatNewCompletion(x *exchange[ChatRequest], t Turn, model string) chatCompletion {
	m := chatWireMessage{Role: "assistant"}
	if t.Text != "" {
		m.Content = &t.Text
	}
	if t.Refusal != "" {
		m.Refusal = &t.Refusal
	}
	m.Reasoning = t.Reasoning
	for _, c := range t.Calls {
		id := c.CallID
		if id == "" {
			id = x.NewID("call")
		}
		if c.Custom {
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: id, Type: "custom", Custom: &chatCustom{Name: c.Name, Input: c.Arguments}})
			continue
		}
		m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: id, Type: "function", Function: &chatFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	finish := t.Finish
	if finish == "" {
		finish = "stop"
		if len(t.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	out := len(t.Text) / 4
	return chatCompletion{ID: x.NewID("chatcmpl"), Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		Choices: []chatChoice{{Message: m, FinishReason: finish}},
		Usage:   chatUsage{PromptTokens: 10, CompletionTokens: out, TotalTokens: 10 + out}}
}

// chatWriteStream writes the completion as chunks: the role, the
// reasoning_content and content word by word (an error chunk after the
// first content delta, with t.StreamError), the refusal in pieces, each
// tool call (id and name, then its arguments in pieces), the finish
// reason, the usage, and [DONE]; t.Shape cuts them otherwise.
func chatWriteStream(sse *eventStream, c chatCompletion, t Turn) {
	shape := t.Shape
	send := func(choices []any, usage any) {
		ev := map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model, "choices": choices}
		if usage != nil {
			ev["usage"] = usage
		} else if shape.UsageNull {
			ev["usage"] = nil
		}
		sse.Event("", ev)
	}
	chunk := func(delta map[string]any, finish any) {
		send([]any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}, nil)
	}
	m := c.Choices[0].Message
	startsWithCall := m.Content == nil && m.Refusal == nil && m.Reasoning == "" && len(m.ToolCalls) > 0
	switch {
	case shape.RoleWithCall && startsWithCall:
	case shape.NullContent:
		chunk(map[string]any{"role": "assistant", "content": nil, "refusal": nil}, nil)
	default:
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	}
	for _, part := range chunks(m.Reasoning) {
		chunk(map[string]any{"reasoning_content": part}, nil)
	}
	if m.Content != nil {
		for i, part := range chunks(*m.Content) {
			chunk(map[string]any{"content": part}, nil)
			if i == 0 && t.StreamError != nil {
				sse.Event("", chatErrorJSON(t.StreamError))
				return
			}
		}
	}
	if t.StreamError != nil {
		sse.Event("", chatErrorJSON(t.StreamError))
		return
	}
	if m.Refusal != nil {
		for _, part := range chunks(*m.Refusal) {
			chunk(map[string]any{"refusal": part}, nil)
		}
	}
	for i, tc := range m.ToolCalls {
		i := i
		delta := func(call chatToolCall) map[string]any {
			d := map[string]any{"tool_calls": []chatToolCall{call}}
			if i == 0 && shape.RoleWithCall && startsWithCall {
				d["role"] = "assistant"
			}
			return d
		}
		switch {
		case tc.Custom != nil:
			chunk(delta(chatToolCall{Index: &i, ID: tc.ID, Type: "custom", Custom: tc.Custom}), nil)
		case shape.WholeCalls:
			chunk(delta(chatToolCall{Index: &i, ID: tc.ID, Type: "function", Function: tc.Function}), nil)
		default:
			chunk(delta(chatToolCall{Index: &i, ID: tc.ID, Type: "function", Function: &chatFunction{Name: tc.Function.Name}}), nil)
			for _, piece := range pieces(tc.Function.Arguments, 4) {
				chunk(map[string]any{"tool_calls": []chatToolCall{{Index: &i, Function: &chatFunction{Arguments: piece}}}}, nil)
			}
		}
	}
	finish := []any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": c.Choices[0].FinishReason}}
	if shape.UsageOnFinish {
		send(finish, c.Usage)
	} else {
		send(finish, nil)
	}
	send([]any{}, c.Usage)
	sse.Event("", "[DONE]")
}

// Results returns the tool results of ToolResults: each role "tool"
// message's tool_call_id and content.
func (r ChatRequest) Results() []Result {
	var out []Result
	for _, m := range r.ToolResults() {
		out = append(out, Result{CallID: m.ToolCallID, Output: m.Content})
	}
	return out
}
