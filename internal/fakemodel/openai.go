// The OpenAI Responses API encoder: [NewOpenAI].
//
// An [OpenAIServer] is a real HTTP server (built on net/http/httptest) that plays a
// scripted model: every POST to /v1/responses consumes the next [Turn] of the
// script and answers with a response in the real wire format, so the real
// github.com/openai/openai-go client (or any other HTTP client) can talk to it.
// Nothing is mocked below HTTP: request encoding, retries, error decoding and
// response decoding are all exercised for real.
//
// # Base URL
//
// openai-go resolves each endpoint path (for example "responses") relative to
// the configured base URL, after appending a trailing slash to the base path.
// The real default is "https://api.openai.com/v1/", so point the client at
// [OpenAIServer.BaseURL], which is the server root followed by "/v1":
//
//	srv := fakemodel.NewOpenAI(turns...)
//	defer srv.Close()
//	client := openai.NewClient(
//		option.WithBaseURL(srv.BaseURL()),
//		option.WithAPIKey("test"),
//	)
//
// Passing the bare server root ([OpenAIServer.URL]) also works: the client then
// posts to /responses, which the server accepts as an alias.
// OpenAIRequest.Path records which one was used.
//
// # Script
//
// Each request that passes validation consumes the next [Turn], in order.
// Once the script is exhausted, every further request is answered with a
// plain assistant message whose text is [ExhaustedText] ("done"), so an
// agent loop terminates gracefully; use [OpenAIServer.Remaining] or
// [OpenAIServer.Requests] to assert that the script was consumed exactly.
//
// # Validation
//
// Like the real API, the server rejects, with an OpenAI-style error body and
// without consuming a turn:
//   - a missing or empty "Authorization: Bearer" API key (401);
//   - a body that is not a JSON object, or that lacks "model" (400);
//   - a previous_response_id that this server did not issue, or that names
//     a response created with "store": false (400,
//     code "previous_response_not_found");
//   - function_call_output items without a call_id, or whose call_id matches
//     no function call in the previous response or in the input, and function
//     calls (from the previous response or from the input) left without a
//     function_call_output (400); custom_tool_call items and their
//     custom_tool_call_output answers count alike. Disable this last group
//     with [OpenAIServer.SetValidateToolOutputs].
//   - a reasoning input item without encrypted_content in a request with
//     "store": false (400), as nothing was stored to find it by, or with an
//     encrypted_content the server did not give that item in a response
//     (400, code "invalid_encrypted_content"; a stream's provisional one
//     in response.output_item.added is not it).
//
// # Errors and retries
//
// A [Turn] with a non-zero Status is answered with that HTTP status and an
// OpenAI-style error body {"error":{"message","type","param","code"}}. Error
// replies carry "retry-after-ms: 0", which openai-go honours (it prefers
// retry-after-ms over retry-after and otherwise backs off for ~0.5s), so a
// scripted 429 or 5xx is retried immediately by the client and the retry
// consumes the next turn. openai-go retries 408, 409, 429 and 5xx by default,
// and obeys an "x-should-retry: true|false" header over the status code; set
// Turn.Header to override any of these headers.
//
// # Streaming
//
// A request with "stream": true (as sent by ResponseService.NewStreaming) is
// answered with server-sent events: response.created, response.in_progress,
// then for each output item response.output_item.added, its content or
// argument events (response.content_part.added, response.output_text.delta,
// response.output_text.done, response.content_part.done, or
// response.function_call_arguments.delta in several pieces and .done,
// a reasoning item's response.reasoning_summary_part and
// response.reasoning_summary_text events, a refusal's response.refusal
// events), response.output_item.done, and finally response.completed
// carrying the full response, which holds fields beyond those the SDK
// knows, as the real API's does. Scripted errors are returned as plain HTTP
// errors before the stream starts, as the real API does for rate limits;
// Turn.StreamError sends an error event mid-stream instead, and Turn.Gzip
// compresses the body.

package fakemodel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// Request is a request received by the server, decoded.
type OpenAIRequest struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path, "/v1/responses" or "/responses".
	Path string
	// Header is the request header (it includes X-Stainless-Retry-Count when
	// sent by openai-go).
	Header http.Header
	// Body is the raw request body.
	Body json.RawMessage

	// Model is the requested model.
	Model string
	// Instructions is the instructions string (or its raw JSON if it was not
	// a string).
	Instructions string
	// Input holds the input items in order. A plain string input is recorded
	// as a single user message item.
	Input []OpenAIInput
	// PreviousResponseID is the previous_response_id, if any.
	PreviousResponseID string
	// Tools holds the declared tools in order.
	Tools []OpenAITool
	// ToolChoice is the raw tool_choice value, if any.
	ToolChoice json.RawMessage
	// Stream reports whether "stream": true was requested.
	Stream bool
	// Store is the "store" flag, nil if absent (the API default is true).
	Store *bool
	// ParallelToolCalls is the "parallel_tool_calls" flag, nil if absent.
	ParallelToolCalls *bool

	// Turn is the index of the scripted turn this request consumed, or -1 if
	// it consumed none (it was rejected by validation, or the script was
	// exhausted and it got the [ExhaustedText] reply).
	Turn int
	// StatusCode is the HTTP status the server replied with (0 while the
	// reply is still being produced).
	StatusCode int
	// ResponseID is the id of the response the server issued, or "" if it
	// replied with an error.
	ResponseID string
}

// InputItem is one decoded item of a request's "input" array.
type OpenAIInput struct {
	// Type is the item type: "message", "function_call",
	// "function_call_output", "item_reference", …. An item with a role and
	// no type (an "easy input message") is reported as "message".
	Type string
	// Role is the message role ("user", "assistant", "system", "developer").
	Role string
	// Text is a message's content: the content string, or the concatenated
	// text of its input_text/output_text parts.
	Text string
	// CallID is the call_id of a function_call or function_call_output item.
	CallID string
	// Name is the function name of a function_call item.
	Name string
	// Arguments is the arguments string of a function_call item.
	Arguments string
	// Output is the output of a function_call_output item: the output
	// string, or the concatenated text of its input_text parts.
	Output string
	// Raw is the item's raw JSON.
	Raw json.RawMessage
}

// Tool is one decoded entry of a request's "tools" array.
type OpenAITool struct {
	// Type is the tool type, "function" for function tools.
	Type string
	// Name is the function name ("" for tools without a name).
	Name string
	// Description is the tool description, if any.
	Description string
	// Strict is the "strict" flag, nil if absent or null.
	Strict *bool
	// Parameters is the raw JSON schema of the parameters, if any.
	Parameters json.RawMessage
	// Raw is the tool's raw JSON.
	Raw json.RawMessage
}

// Results returns the function_call_output items of the input,
// in order.
func (r OpenAIRequest) Results() []Result {
	var out []Result
	for _, it := range r.Input {
		if it.Type == "function_call_output" {
			out = append(out, Result{CallID: it.CallID, Output: it.Output})
		}
	}
	return out
}

// ModelResults decodes the function_call_outputs of every request the
// server received, by call id (a later request's output for a call id
// replaces an earlier one's); it fails at the first output that is not a
// model result.
func (s *OpenAIServer) ModelResults() (map[string]guard.Result, error) {
	m := map[string]guard.Result{}
	for _, req := range s.Requests() {
		for _, o := range req.Results() {
			r, err := o.ModelResult()
			if err != nil {
				return nil, err
			}
			m[o.CallID] = r
		}
	}
	return m, nil
}

// ToolNames returns the names of the declared tools that have a name, in
// order.
func (r OpenAIRequest) ToolNames() []string {
	var names []string
	for _, t := range r.Tools {
		if t.Name != "" {
			names = append(names, t.Name)
		}
	}
	return names
}

// oaiIssued is what the server remembers about a response it issued.
type oaiIssued struct {
	stored  bool
	callIDs []string
}

// OpenAIServer is a fake OpenAI Responses API server playing a scripted model.
// It is safe for concurrent use. Its Close (which blocks until all
// outstanding requests have completed), Enqueue and Remaining are those of
// every fake server.
type OpenAIServer struct {
	*oaiServer

	mu            sync.Mutex
	responses     map[string]oaiIssued // the responses issued, by id
	validateTools bool
}

type (
	oaiServer   = server[OpenAIRequest]
	oaiExchange = exchange[OpenAIRequest]
)

// NewOpenAI starts a server that plays turns in order. Call
// [OpenAIServer.Close] when done.
func NewOpenAI(turns ...Turn) *OpenAIServer {
	s := &OpenAIServer{responses: make(map[string]oaiIssued), validateTools: true}
	s.oaiServer = newServer(turns, wireFormat[OpenAIRequest]{
		Decode: s.decode,
		Mark:   func(r *OpenAIRequest, status, turn int) { r.StatusCode, r.Turn = status, turn },
		Fail:   oaiFail,
		Reply:  s.reply,
	})
	return s
}

// URL returns the server root, e.g. "http://127.0.0.1:12345". As an openai-go
// base URL it makes the client post to /responses, which is accepted; prefer
// [OpenAIServer.BaseURL].
func (s *OpenAIServer) URL() string { return s.oaiServer.URL() }

// BaseURL returns the base URL to pass to option.WithBaseURL: the server root
// followed by "/v1" (e.g. "http://127.0.0.1:12345/v1"), mirroring the real
// "https://api.openai.com/v1/". openai-go then posts to /v1/responses.
func (s *OpenAIServer) BaseURL() string { return s.oaiServer.URL() + "/v1" }

// Client returns an HTTP client configured for the server (useful with
// option.WithHTTPClient, though the default client works as well).
func (s *OpenAIServer) Client() *http.Client { return httpClient(s.oaiServer) }

// SetValidateToolOutputs turns the function-call bookkeeping checks on (the
// default) or off: a function_call_output without call_id or with an unknown
// call_id, and a function call left without output, are then rejected with
// 400 as the real API does.
func (s *OpenAIServer) SetValidateToolOutputs(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.validateTools = on
}

// Requests returns every request received so far, in arrival order,
// including rejected ones.
func (s *OpenAIServer) Requests() []OpenAIRequest {
	out := s.oaiServer.Requests()
	for i, r := range out {
		r.Header = r.Header.Clone()
		r.Input = append([]OpenAIInput(nil), r.Input...)
		r.Tools = append([]OpenAITool(nil), r.Tools...)
		out[i] = r
	}
	return out
}

// decode decodes a request, and refuses it as the real API does before it
// consumes a turn. Every reply carries the request's x-request-id.
func (s *OpenAIServer) decode(x *oaiExchange) (OpenAIRequest, *refusal) {
	r := x.R
	req := OpenAIRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: json.RawMessage(x.Body), Turn: -1}
	x.W.Header().Set("x-request-id", x.NewID("req"))
	refused := s.check(r, x.Body, &req)
	return req, refused
}

// oaiFail returns the error a turn's Status answers with, its Error and
// Header over the status's defaults.
func oaiFail(t Turn, _ OpenAIRequest) *refusal {
	if t.Status == 0 {
		return nil
	}
	return oaiRefusal(t.Status, oaiErrorFor(t.Status, t.Error), t.Header)
}

// reply answers with the turn's response, streamed or not, and remembers
// the response for the requests naming it as their previous one.
func (s *OpenAIServer) reply(x *oaiExchange, t Turn, req OpenAIRequest) {
	var wr oaiWireRequest
	_ = json.Unmarshal(x.Body, &wr)
	s.mu.Lock()
	resp := oaiBuildResponse(x, &t, &wr, &req, len(x.Body))
	s.responses[resp.ID] = oaiIssued{stored: req.Store == nil || *req.Store, callIDs: resp.callIDs}
	s.mu.Unlock()
	req.ResponseID = resp.ID
	h := x.W.Header()
	h.Set("openai-processing-ms", "1")
	setHeaders(h, t.Header)
	x.Reply(&req, t.Gzip, req.Stream, resp, func(sse *eventStream) { oaiWriteStream(sse, resp, &t) })
}

// oaiRefusal is an OpenAI-style error reply, which openai-go retries at
// once; extra replaces any of its headers.
func oaiRefusal(status int, e Error, extra http.Header) *refusal {
	h := retryNow()
	setHeaders(h, extra)
	return &refusal{Status: status, Header: h, Body: map[string]any{
		"error": map[string]any{
			"message": e.Message,
			"type":    e.Type,
			"param":   oaiNullable(e.Param),
			"code":    oaiNullable(e.Code),
		},
	}}
}

// check validates a request as the real API does before it consumes a
// turn: the path, the method, an API key, JSON, a model, a previous
// response that was stored, reasoning items and the function-call
// bookkeeping. It fills req from the body.
func (s *OpenAIServer) check(r *http.Request, body []byte, req *OpenAIRequest) *refusal {
	bad := func(status int, e Error) *refusal { return oaiRefusal(status, e, nil) }
	if r.URL.Path != "/v1/responses" && r.URL.Path != "/responses" {
		return bad(http.StatusNotFound, Error{Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error"})
	}
	if r.Method != http.MethodPost {
		return bad(http.StatusMethodNotAllowed, Error{Message: fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error"})
	}
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || strings.TrimSpace(key) == "" {
		return bad(http.StatusUnauthorized, Error{
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
			Type:    "invalid_request_error",
		})
	}
	if _, err := oaiDecodeRequest(body, req); err != nil {
		return bad(http.StatusBadRequest, Error{
			Message: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.) Error: " + err.Error(),
			Type:    "invalid_request_error",
		})
	}
	if req.Model == "" {
		return bad(http.StatusBadRequest, Error{Message: "Missing required parameter: 'model'.", Type: "invalid_request_error",
			Param: "model", Code: "missing_required_parameter"})
	}
	s.mu.Lock()
	prev, found := s.responses[req.PreviousResponseID]
	validate := s.validateTools
	s.mu.Unlock()
	if req.PreviousResponseID != "" && (!found || !prev.stored) {
		return bad(http.StatusBadRequest, Error{
			Message: fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID),
			Type:    "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found",
		})
	}
	if e := oaiCheckReasoning(*req); e != nil {
		return bad(http.StatusBadRequest, *e)
	}
	if validate {
		if e := oaiCheckToolOutputs(prev.callIDs, req.Input); e != nil {
			return bad(http.StatusBadRequest, *e)
		}
	}
	return nil
}

// oaiCheckReasoning rejects, as the real API does, a reasoning input item
// without encrypted_content in a request with "store": false: such an item
// could only be found by id among stored items, and nothing was stored.
func oaiCheckReasoning(req OpenAIRequest) *Error {
	if req.Store == nil || *req.Store {
		return nil
	}
	for i, it := range req.Input {
		if it.Type != "reasoning" {
			continue
		}
		var r struct {
			ID        string `json:"id"`
			Encrypted string `json:"encrypted_content"`
		}
		_ = json.Unmarshal(it.Raw, &r)
		if r.Encrypted == "" {
			return &Error{
				Message: fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false.", r.ID),
				Type:    "invalid_request_error",
				Param:   fmt.Sprintf("input[%d]", i),
			}
		}
		if _, ok := oaiUnseal(r.Encrypted, r.ID); !ok {
			return &Error{
				Message: "The encrypted content for item " + r.ID + " could not be verified.",
				Type:    "invalid_request_error",
				Param:   fmt.Sprintf("input[%d].encrypted_content", i),
				Code:    "invalid_encrypted_content",
			}
		}
	}
	return nil
}

// oaiSeal is a reasoning item's encrypted_content: its text and id, so that
// it comes back to the item it was issued for.
func oaiSeal(text, id string) string {
	b, _ := json.Marshal(map[string]string{"reasoning": text, "id": id})
	return base64.StdEncoding.EncodeToString(b)
}

// oaiUnseal returns the text sealed for item id, and false when enc is not
// a seal for that item (another item's, a provisional one, or tampered).
func oaiUnseal(enc, id string) (string, bool) {
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	var v struct{ Reasoning, ID string }
	if json.Unmarshal(b, &v) != nil || v.ID != id || v.ID == "" {
		return "", false
	}
	return v.Reasoning, true
}

// oaiCheckToolOutputs reports the first function-call bookkeeping error, as the
// real API would, or nil.
func oaiCheckToolOutputs(prevCalls []string, input []OpenAIInput) *Error {
	known := make(map[string]bool)
	var order []string
	for _, id := range prevCalls {
		if !known[id] {
			known[id] = true
			order = append(order, id)
		}
	}
	for _, it := range input {
		if (it.Type == "function_call" || it.Type == "custom_tool_call") && it.CallID != "" && !known[it.CallID] {
			known[it.CallID] = true
			order = append(order, it.CallID)
		}
	}
	answered := make(map[string]bool)
	for i, it := range input {
		if it.Type != "function_call_output" && it.Type != "custom_tool_call_output" {
			continue
		}
		if it.CallID == "" {
			return &Error{
				Message: fmt.Sprintf("Missing required parameter: 'input[%d].call_id'.", i),
				Type:    "invalid_request_error",
				Param:   fmt.Sprintf("input[%d].call_id", i),
				Code:    "missing_required_parameter",
			}
		}
		if !known[it.CallID] {
			return &Error{
				Message: fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID),
				Type:    "invalid_request_error",
				Param:   "input",
			}
		}
		answered[it.CallID] = true
	}
	for _, id := range order {
		if !answered[id] {
			return &Error{
				Message: fmt.Sprintf("No tool output found for function call %s.", id),
				Type:    "invalid_request_error",
				Param:   "input",
			}
		}
	}
	return nil
}

// oaiErrorFor fills in the defaults of an error body for status.
func oaiErrorFor(status int, override *Error) Error {
	var e Error
	switch {
	case status == http.StatusTooManyRequests:
		e = Error{
			Message: "Rate limit reached for requests. Please try again shortly.",
			Type:    "requests",
			Code:    "rate_limit_exceeded",
		}
	case status == http.StatusUnauthorized:
		e = Error{Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"}
	case status >= 500:
		e = Error{
			Message: "The server had an error while processing your request. Sorry about that!",
			Type:    "server_error",
		}
	default:
		e = Error{Message: http.StatusText(status), Type: "invalid_request_error"}
		if e.Message == "" {
			e.Message = "Error " + strconv.Itoa(status)
		}
	}
	if override != nil {
		if override.Message != "" {
			e.Message = override.Message
		}
		if override.Type != "" {
			e.Type = override.Type
		}
		if override.Param != "" {
			e.Param = override.Param
		}
		if override.Code != "" {
			e.Code = override.Code
		}
	}
	return e
}

func oaiNullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// oaiWireRequest is the subset of the request body the server interprets.
type oaiWireRequest struct {
	Model              string            `json:"model"`
	Instructions       json.RawMessage   `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	PreviousResponseID string            `json:"previous_response_id"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    json.RawMessage   `json:"max_output_tokens"`
	Metadata           json.RawMessage   `json:"metadata"`
	Include            []string          `json:"include"`
}

// oaiDecodeRequest parses body into req's decoded fields.
func oaiDecodeRequest(body []byte, req *OpenAIRequest) (*oaiWireRequest, error) {
	var wr oaiWireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, err
	}
	req.Model = wr.Model
	req.Instructions = oaiStringOrRaw(wr.Instructions)
	req.PreviousResponseID = wr.PreviousResponseID
	req.ToolChoice = wr.ToolChoice
	req.Stream = wr.Stream
	req.Store = wr.Store
	req.ParallelToolCalls = wr.ParallelToolCalls

	if in := bytes.TrimSpace(wr.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
		if in[0] == '"' {
			var text string
			if err := json.Unmarshal(in, &text); err != nil {
				return nil, err
			}
			req.Input = []OpenAIInput{{Type: "message", Role: "user", Text: text, Raw: in}}
		} else {
			var items []json.RawMessage
			if err := json.Unmarshal(in, &items); err != nil {
				return nil, fmt.Errorf("input: %w", err)
			}
			for i, raw := range items {
				it, err := oaiDecodeInputItem(raw)
				if err != nil {
					return nil, fmt.Errorf("input[%d]: %w", i, err)
				}
				req.Input = append(req.Input, it)
			}
		}
	}

	for i, raw := range wr.Tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Strict      *bool           `json:"strict"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		req.Tools = append(req.Tools, OpenAITool{
			Type:        t.Type,
			Name:        t.Name,
			Description: t.Description,
			Strict:      t.Strict,
			Parameters:  t.Parameters,
			Raw:         raw,
		})
	}
	return &wr, nil
}

func oaiDecodeInputItem(raw json.RawMessage) (OpenAIInput, error) {
	var w struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return OpenAIInput{}, err
	}
	it := OpenAIInput{
		Type:      w.Type,
		Role:      w.Role,
		Text:      oaiPartsText(w.Content),
		CallID:    w.CallID,
		Name:      w.Name,
		Arguments: oaiStringOrRaw(w.Arguments),
		Output:    oaiPartsText(w.Output),
		Raw:       raw,
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	return it, nil
}

// oaiStringOrRaw returns a JSON string's value, "" for absent or null, and the
// raw JSON text otherwise.
func oaiStringOrRaw(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// oaiPartsText returns a JSON string's value, or the concatenated "text" of an
// array of content parts; the raw JSON text when it is neither.
func oaiPartsText(raw json.RawMessage) string {
	if s, ok := contentText(raw); ok {
		return s
	}
	return string(raw)
}

// Wire format of responses.

type oaiWireResponse struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Background         bool               `json:"background"`
	Error              *oaiWireError      `json:"error"`
	IncompleteDetails  *oaiWireIncomplete `json:"incomplete_details"`
	Instructions       json.RawMessage    `json:"instructions"`
	MaxOutputTokens    json.RawMessage    `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []json.RawMessage  `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          oaiWireReasoning   `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               json.RawMessage    `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *oaiWireUsage      `json:"usage"`
	User               *string            `json:"user"`
	Metadata           json.RawMessage    `json:"metadata"`
	// Fields the real API sends that the SDK does not name.
	Billing              map[string]string `json:"billing"`
	PromptCacheKey       *string           `json:"prompt_cache_key"`
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
	Conversation         *struct{}         `json:"conversation"`
	FrequencyPenalty     float64           `json:"frequency_penalty"`
	PresencePenalty      float64           `json:"presence_penalty"`

	// items mirrors Output for streaming; callIDs lists the function calls.
	items   []oaiWireItem
	callIDs []string
}

type oaiWireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type oaiWireIncomplete struct {
	Reason string `json:"reason"`
}

// oaiIncludes reports whether the request's include list names what.
func oaiIncludes(include []string, what string) bool {
	for _, i := range include {
		if i == what {
			return true
		}
	}
	return false
}

type oaiWireReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type oaiWireUsage struct {
	InputTokens         int64          `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int64          `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int64          `json:"total_tokens"`
}

// oaiWireItem is an output item: a message or a function_call.
type oaiWireItem struct {
	Type      string              `json:"type"`
	ID        string              `json:"id"`
	Status    string              `json:"status,omitempty"` // none on reasoning items
	Role      string              `json:"role,omitempty"`
	Content   []oaiWireOutputText `json:"content,omitempty"`
	CallID    string              `json:"call_id,omitempty"`
	Name      string              `json:"name,omitempty"`
	Namespace string              `json:"namespace,omitempty"`
	Arguments *string             `json:"arguments,omitempty"`
	Input     *string             `json:"input,omitempty"`
	Phase     string              `json:"phase,omitempty"`
	Summary   []oaiWireSummary    `json:"summary,omitempty"`
	Encrypted string              `json:"encrypted_content,omitempty"`
	text      string              // message text, for streaming
	refusal   string              // message refusal, for streaming
}

type oaiWireSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// oaiWireOutputText is a message's content part: output_text (Text, with
// empty annotations and logprobs) or refusal (Refusal).
type oaiWireOutputText struct {
	Type    string
	Text    string
	Refusal string
}

// MarshalJSON writes the part as the API does: a refusal part has only
// its refusal, an output_text part its text, annotations and logprobs.
func (p oaiWireOutputText) MarshalJSON() ([]byte, error) {
	if p.Type == "refusal" {
		return json.Marshal(map[string]string{"type": p.Type, "refusal": p.Refusal})
	}
	return json.Marshal(map[string]any{"type": p.Type, "text": p.Text, "annotations": []any{}, "logprobs": []any{}})
}

func oaiOutputText(text string) oaiWireOutputText {
	return oaiWireOutputText{Type: "output_text", Text: text}
}

func (it oaiWireItem) marshal() json.RawMessage {
	if it.Type == "message" && it.Content == nil {
		// A message always carries a content array, possibly empty.
		type alias oaiWireItem
		b, _ := json.Marshal(struct {
			alias
			Content []oaiWireOutputText `json:"content"`
		}{alias(it), []oaiWireOutputText{}})
		return b
	}
	b, _ := json.Marshal(it)
	return b
}

func oaiOrNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// oaiBuildResponse builds the completed response for turn.
func oaiBuildResponse(x *oaiExchange, turn *Turn, wr *oaiWireRequest, req *OpenAIRequest, inputBytes int) *oaiWireResponse {
	now := time.Now().Unix()
	resp := &oaiWireResponse{
		ID:                 x.NewID("resp"),
		Object:             "response",
		CreatedAt:          now,
		Status:             "completed",
		CompletedAt:        &now,
		Instructions:       oaiOrNull(wr.Instructions),
		MaxOutputTokens:    oaiOrNull(wr.MaxOutputTokens),
		Model:              req.Model,
		ParallelToolCalls:  req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		PreviousResponseID: oaiNullable(req.PreviousResponseID),
		Store:              req.Store == nil || *req.Store,
		Temperature:        1,
		Text:               json.RawMessage(`{"format":{"type":"text"},"verbosity":"medium"}`),
		ToolChoice:         wr.ToolChoice,
		Tools:              wr.Tools,
		TopP:               1,
		Truncation:         "disabled",
		Metadata:           wr.Metadata,
	}
	if wr.Temperature != nil {
		resp.Temperature = *wr.Temperature
	}
	if wr.TopP != nil {
		resp.TopP = *wr.TopP
	}
	if len(resp.ToolChoice) == 0 {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if len(resp.Metadata) == 0 || bytes.Equal(resp.Metadata, []byte("null")) {
		resp.Metadata = json.RawMessage(`{}`)
	}

	outTokens := 0
	if turn.Finish != "" {
		resp.Status, resp.CompletedAt = "incomplete", nil
		resp.IncompleteDetails = &oaiWireIncomplete{Reason: turn.Finish}
	}
	if turn.StreamError != nil {
		resp.Status, resp.CompletedAt = "failed", nil
		resp.Error = &oaiWireError{Code: turn.StreamError.Code, Message: turn.StreamError.Message}
	}
	resp.Billing = map[string]string{"payer": "developer"}
	if (turn.Reasoning != "" || turn.Summary != "") && !turn.Empty {
		it := oaiWireItem{Type: "reasoning", ID: x.NewID("rs"), Summary: []oaiWireSummary{}}
		if turn.Summary != "" {
			it.Summary = []oaiWireSummary{{Type: "summary_text", Text: turn.Summary}}
		}
		if oaiIncludes(wr.Include, "reasoning.encrypted_content") {
			it.Encrypted = oaiSeal(turn.Reasoning, it.ID)
		}
		resp.items = append(resp.items, it)
	}
	if !turn.Empty {
		if turn.Text != "" || turn.Refusal != "" {
			msg := oaiWireItem{Type: "message", ID: x.NewID("msg"), Status: "completed", Role: "assistant",
				Content: []oaiWireOutputText{}, text: turn.Text, refusal: turn.Refusal}
			if turn.Text != "" {
				msg.Content = append(msg.Content, oaiOutputText(turn.Text))
			}
			if turn.Refusal != "" {
				msg.Content = append(msg.Content, oaiWireOutputText{Type: "refusal", Refusal: turn.Refusal})
			}
			if turn.Commentary {
				msg.Phase = "commentary"
			}
			resp.items = append(resp.items, msg)
			outTokens += oaiTokens(len(turn.Text) + len(turn.Refusal))
		}
		for _, c := range turn.Calls {
			callID := c.CallID
			if callID == "" {
				callID = x.NewID("call")
			}
			args := c.Arguments
			status := c.Status
			if status == "" {
				status = "completed"
			}
			item := oaiWireItem{
				Type:      "function_call",
				ID:        x.NewID("fc"),
				Status:    status,
				CallID:    callID,
				Name:      c.Name,
				Namespace: c.Namespace,
				Arguments: &args,
			}
			if c.Custom {
				item = oaiWireItem{Type: "custom_tool_call", ID: x.NewID("ctc"), Status: "completed", CallID: callID, Name: c.Name, Input: &args}
			}
			resp.items = append(resp.items, item)
			resp.callIDs = append(resp.callIDs, callID)
			outTokens += oaiTokens(len(c.Name) + len(c.Arguments))
		}
	}
	resp.Output = make([]json.RawMessage, 0, len(resp.items))
	for _, it := range resp.items {
		resp.Output = append(resp.Output, it.marshal())
	}
	in := int64(oaiTokens(inputBytes))
	resp.Usage = &oaiWireUsage{
		InputTokens:         in,
		InputTokensDetails:  map[string]int{"cached_tokens": 0, "cache_write_tokens": 0},
		OutputTokens:        int64(outTokens),
		OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens:         in + int64(outTokens),
	}
	return resp
}

// oaiTokens is a rough token estimate for n bytes of text.
func oaiTokens(n int) int { return (n + 3) / 4 }

// oaiWriteStream writes resp as a server-sent event stream: for each item
// its added event, its content (text deltas word by word, refusal deltas,
// summary deltas, argument deltas in pieces) and its done event, then the
// event that ends the response; with t.StreamError an error event after
// the first text delta (or the first item) ends it instead.
func oaiWriteStream(sse *eventStream, resp *oaiWireResponse, t *Turn) {
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sse.Event(typ, fields)
	}
	// fail sends the scripted error event and reports whether the stream
	// ended there.
	failed := false
	fail := func() bool {
		if t.StreamError == nil || failed {
			return failed
		}
		failed = true
		e := t.StreamError
		if t.ErrorFlat {
			emit("error", map[string]any{"code": oaiNullable(e.Code), "message": e.Message, "param": oaiNullable(e.Param)})
			return true
		}
		emit("error", map[string]any{"error": map[string]any{"type": e.Type, "code": oaiNullable(e.Code), "message": e.Message, "param": oaiNullable(e.Param)}})
		emit("response.failed", map[string]any{"response": resp})
		return true
	}

	pending := *resp
	pending.Status = "in_progress"
	pending.CompletedAt = nil
	pending.Error = nil
	pending.Output = []json.RawMessage{}
	pending.Usage = nil
	emit("response.created", map[string]any{"response": &pending})
	emit("response.in_progress", map[string]any{"response": &pending})

	for i, it := range resp.items {
		added := it
		if it.Status != "" {
			added.Status = "in_progress"
		}
		switch it.Type {
		case "message":
			added.Content = nil
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added.marshal()})
			for ci, part := range it.Content {
				with := func(kv ...any) map[string]any {
					return oaiFields(kv, "item_id", it.ID, "output_index", i, "content_index", ci)
				}
				if part.Type == "refusal" {
					emit("response.content_part.added", with("part", oaiWireOutputText{Type: "refusal"}))
					for _, chunk := range chunks(it.refusal) {
						emit("response.refusal.delta", with("delta", chunk))
					}
					emit("response.refusal.done", with("refusal", it.refusal))
					emit("response.content_part.done", with("part", part))
					continue
				}
				emit("response.content_part.added", with("part", oaiOutputText("")))
				for _, chunk := range chunks(it.text) {
					emit("response.output_text.delta", with("delta", chunk, "logprobs", []any{}))
					if fail() {
						return
					}
				}
				emit("response.output_text.done", with("text", it.text, "logprobs", []any{}))
				emit("response.content_part.done", with("part", part))
			}
		case "reasoning":
			if added.Encrypted != "" {
				// provisional, as the real API's added event carries
				added.Encrypted = oaiSeal("", "provisional")
			}
			added.Summary = []oaiWireSummary{}
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added.marshal()})
			for si, sum := range it.Summary {
				ev := func(kv ...any) map[string]any {
					return oaiFields(kv, "item_id", it.ID, "output_index", i, "summary_index", si)
				}
				emit("response.reasoning_summary_part.added", ev("part", oaiWireSummary{Type: "summary_text"}))
				for _, chunk := range chunks(sum.Text) {
					emit("response.reasoning_summary_text.delta", ev("delta", chunk))
				}
				emit("response.reasoning_summary_text.done", ev("text", sum.Text))
				emit("response.reasoning_summary_part.done", ev("part", sum))
			}
		case "function_call":
			empty := ""
			added.Arguments = &empty
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added.marshal()})
			for _, piece := range pieces(*it.Arguments, 4) {
				emit("response.function_call_arguments.delta", map[string]any{
					"item_id": it.ID, "output_index": i, "delta": piece,
				})
			}
			emit("response.function_call_arguments.done", map[string]any{
				"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": *it.Arguments,
			})
		default:
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added.marshal()})
		}
		if fail() {
			return
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": it.marshal()})
	}
	if fail() {
		return
	}
	if !sse.Hold(t.Hold) {
		return
	}
	if resp.Status == "incomplete" {
		emit("response.incomplete", map[string]any{"response": resp})
		return
	}
	emit("response.completed", map[string]any{"response": resp})
}

// oaiFields returns an event's fields: the key-value pairs of base, then of
// kv.
func oaiFields(kv []any, base ...any) map[string]any {
	m := map[string]any{}
	for _, pairs := range [][]any{base, kv} {
		for j := 0; j+1 < len(pairs); j += 2 {
			m[pairs[j].(string)] = pairs[j+1]
		}
	}
	return m
}
