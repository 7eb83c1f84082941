// Package geminitest provides a fake Gemini API server for tests and
// offline examples.
//
// A [Server] is a real HTTP server (net/http/httptest) playing a scripted
// model: every POST to /{version}/models/{model}:generateContent consumes
// the next [Turn] and is answered with a GenerateContentResponse in the
// Gemini API's wire format; :streamGenerateContent?alt=sse answers with
// server-sent events, a chunk per text word and, as gemini-2.5-pro and
// Gemini 3 do, a chunk per function call ([Turn.OneChunk] puts them in one
// chunk, as 2.5-flash and Vertex AI do; [Turn.StreamArgs] streams each
// call's arguments as Vertex's partialArgs pieces, closed by an empty
// functionCall). Usage counts are cumulative per chunk, as Gemini's are.
// The real google.golang.org/genai client talks to it through
// genai.HTTPOptions{BaseURL: [Server.URL]}; nothing is mocked above HTTP.
//
// The server keeps nothing between requests, as the real API does, and
// checks each request as the real API does. A request is rejected with 400
// and a Google-style error body, without consuming a turn, when it has no
// contents, when a model content's function calls are not answered by as
// many functionResponse parts (names in order, ids where the call had one)
// in the user content right after it, when a functionResponse answers no
// call, or when the first function call of a model content the server
// signed does not carry its thoughtSignature back unchanged (Gemini 3
// refuses such a request). A request without an API key
// (x-goog-api-key) gets 401.
//
// Once the script is exhausted every request is answered with the text
// [ExhaustedText].
package geminitest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/adapters/internal/fakeapi"
)

// ExhaustedText is the reply once every scripted turn has been consumed.
const ExhaustedText = "done"

// Turn is one scripted reply of the fake model.
type Turn struct {
	// Thought is a thought part's text (includeThoughts), before the rest.
	Thought string
	// Text is a text part; with Calls it comes first.
	Text string
	// Calls are functionCall parts, in order.
	Calls []Call
	// FinishReason overrides "STOP" ("MAX_TOKENS", "SAFETY",
	// "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", ...).
	FinishReason string
	// FinishMessage, if set, is the candidate's finishMessage.
	FinishMessage string
	// BlockReason, if set, answers with no candidates and this
	// promptFeedback.blockReason (a blocked prompt).
	BlockReason string
	// SignText signs the last text part too, and in a stream ends with an
	// empty text part carrying a signature, as Gemini 3 does.
	SignText bool
	// NoResponseID leaves out the responseId, as one recorded stream did.
	NoResponseID bool
	// OneChunk streams every call in one chunk.
	OneChunk bool
	// StreamArgs streams each call's arguments as partialArgs pieces (top
	// level members only; strings in two pieces).
	StreamArgs bool
	// Pace, if set, is the pause before each chunk of a stream after the
	// first, as a model takes time to write.
	Pace time.Duration
	// Hold, if set, holds a stream open after its content chunks until it
	// is closed, then sends the finishing chunk: a test's way to keep a
	// reply streaming while something else happens.
	// A request that ends first ends the stream there.
	Hold <-chan struct{}
	// StreamError, if set, ends a stream after its content with this error
	// chunk instead of the finishing chunk.
	StreamError *Error
	// Status, if non-zero, answers with this HTTP status and an error body
	// instead.
	Status int
	// Respond, if set, decides the reply from the request; its result is
	// used in place of this turn (nil: the exhausted reply).
	Respond func(req Request) *Turn
}

// Error is a Google API error: {"error": {"code", "message", "status"}}.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

// Call is one functionCall part.
type Call struct {
	// Name is the function's name.
	Name string
	// Args is the arguments' JSON object text ("" for none).
	Args string
	// ID is the call's id; "" sends none, as Gemini 2.x and Vertex AI do.
	ID string
}

// Request is a request the server received, decoded.
type Request struct {
	// Path is the URL path, /{version}/models/{model}:{method}.
	Path string
	// Header is the request header; x-goog-api-key carries the key (or
	// the query's key parameter does).
	Header http.Header
	// Body is the raw GenerateContentRequest.
	Body json.RawMessage
	// Model is the model named in the path.
	Model string
	// Stream reports whether the method was streamGenerateContent.
	Stream bool
	// System is the systemInstruction's text parts, concatenated.
	System string
	// Contents are the conversation, in order.
	Contents []*genai.Content
	// Tools are the declared function declarations, of every tool.
	Tools []*genai.FunctionDeclaration
	// StatusCode is the status the server answered.
	StatusCode int
	// Done is when the server finished writing the response.
	Done time.Time
}

// FunctionResponses returns the functionResponse parts of the last content.
func (r Request) FunctionResponses() []*genai.FunctionResponse {
	if len(r.Contents) == 0 {
		return nil
	}
	var out []*genai.FunctionResponse
	for _, p := range r.Contents[len(r.Contents)-1].Parts {
		if p != nil && p.FunctionResponse != nil {
			out = append(out, p.FunctionResponse)
		}
	}
	return out
}

// ToolNames returns the declared functions' names, in order.
func (r Request) ToolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// Server is a fake Gemini API server. It is safe for concurrent use.
// Close, Enqueue, Remaining and Requests (so far, in order) are those of
// every fake server.
type Server struct{ *server }

// server is the fake servers' core, embedded so that its methods are
// Server's own.
type server = fakeapi.Server[Turn, Request]

// NewServer starts a server playing turns in order; Close it when done.
func NewServer(turns ...Turn) *Server { return &Server{fakeapi.NewServer(turns, gemini)} }

// URL returns the server root, e.g. "http://127.0.0.1:12345", the base URL
// to pass as genai.HTTPOptions.BaseURL (the SDK posts to
// /v1beta/models/{model}:generateContent under it).
func (s *Server) URL() string { return s.server.URL() }

// BaseURL is URL, named as the other fakes name it.
func (s *Server) BaseURL() string { return s.server.URL() }

// Signature is the thoughtSignature the server gives the first function
// call (and, with SignText, text parts) of a reply: derived from the part,
// so the server can check it comes back unchanged without keeping state.
func Signature(p *genai.Part) []byte {
	var b []byte
	if p.FunctionCall != nil {
		args, _ := json.Marshal(p.FunctionCall.Args)
		b = fmt.Appendf(nil, "call\x00%s\x00%s", p.FunctionCall.Name, args)
	} else {
		b = fmt.Appendf(nil, "text\x00%s", p.Text)
	}
	sum := sha256.Sum256(b)
	return append([]byte("fake-signature:"), sum[:8]...)
}

// gemini is the Gemini API's wire format.
var gemini = fakeapi.Wire[Turn, Request]{Decode: decode, Fail: fail, Reply: reply, Exhausted: Turn{Text: ExhaustedText},
	Respond: func(t Turn) func(Request) *Turn { return t.Respond }, Mark: func(r *Request, status, _ int) { r.StatusCode = status }}

// decode decodes a request, and refuses it as the real API does: a wrong
// route or method, no API key, a body that is not JSON, a malformed
// conversation.
func decode(x *fakeapi.Exchange[Turn, Request]) (Request, *fakeapi.Refusal) {
	r := x.R
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: x.Body}
	model, method, ok := strings.Cut(r.URL.Path[strings.LastIndex(r.URL.Path, "/models/")+len("/models/"):], ":")
	if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/models/") || !ok ||
		(method != "generateContent" && method != "streamGenerateContent") {
		return req, refusal(http.StatusNotFound, "NOT_FOUND", "no such method: "+r.Method+" "+r.URL.Path)
	}
	if r.Header.Get("x-goog-api-key") == "" && r.URL.Query().Get("key") == "" {
		return req, refusal(http.StatusUnauthorized, "UNAUTHENTICATED", "API key not valid")
	}
	var wire struct {
		Contents          []*genai.Content `json:"contents"`
		SystemInstruction *genai.Content   `json:"systemInstruction"`
		Tools             []*genai.Tool    `json:"tools"`
	}
	if err := json.Unmarshal(x.Body, &wire); err != nil {
		return req, refusal(http.StatusBadRequest, "INVALID_ARGUMENT", "invalid JSON payload: "+err.Error())
	}
	req.Model, req.Stream, req.Contents = model, method == "streamGenerateContent", wire.Contents
	if wire.SystemInstruction != nil {
		for _, p := range wire.SystemInstruction.Parts {
			req.System += p.Text
		}
	}
	for _, t := range wire.Tools {
		req.Tools = append(req.Tools, t.FunctionDeclarations...)
	}
	if msg := check(wire.Contents); msg != "" {
		return req, refusal(http.StatusBadRequest, "INVALID_ARGUMENT", msg)
	}
	return req, nil
}

// fail returns the error a turn's Status answers with.
func fail(t Turn, _ Request) *fakeapi.Refusal {
	if t.Status == 0 {
		return nil
	}
	return refusal(t.Status, http.StatusText(t.Status), "scripted error")
}

// reply answers with the turn's response, or its chunks streamed, and
// logs when it was done.
func reply(x *fakeapi.Exchange[Turn, Request], t Turn, req Request) {
	responseID := x.NewID("resp")
	if t.NoResponseID {
		responseID = ""
	}
	x.Reply(&req, false, req.Stream, response(t, responseID, req.Model), func(sse *fakeapi.SSE) {
		writeStream(sse, t, responseID, req.Model)
	})
	req.Done = time.Now()
	x.Log(req)
}

// writeStream writes the turn's chunks, paced as it says; with a Hold,
// the finish reason rides alone, after it, and with a StreamError an
// error chunk ends the stream.
func writeStream(sse *fakeapi.SSE, t Turn, responseID, model string) {
	chunks, fail := streamChunks(t, responseID, model)
	var finish map[string]any
	if t.Hold != nil && fail == nil {
		last := chunks[len(chunks)-1]
		cand := last["candidates"].([]any)[0].(map[string]any)
		finish = map[string]any{"candidates": []any{map[string]any{"finishReason": cand["finishReason"], "index": 0}},
			"usageMetadata": last["usageMetadata"], "modelVersion": model}
		if responseID != "" {
			finish["responseId"] = responseID
		}
		delete(cand, "finishReason")
	}
	for i, c := range chunks {
		if i > 0 {
			sse.Wait(t.Pace)
		}
		sse.Event("", c)
	}
	switch {
	case fail != nil:
		sse.Event("", map[string]any{"error": fail})
	case finish != nil && sse.Hold(t.Hold):
		sse.Event("", finish)
	}
}

// check validates the conversation as the real API does; "" when valid.
func check(contents []*genai.Content) string {
	if len(contents) == 0 {
		return "contents is not specified"
	}
	for i, c := range contents {
		if c == nil || len(c.Parts) == 0 {
			return fmt.Sprintf("contents[%d].parts must not be empty", i)
		}
		var calls []*genai.Part
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				calls = append(calls, p)
			}
			if p.FunctionResponse != nil && (i == 0 || !hasCall(contents[i-1], p.FunctionResponse)) {
				return fmt.Sprintf("contents[%d]: function response %q answers no function call of the turn before", i, p.FunctionResponse.Name)
			}
		}
		if len(calls) == 0 {
			continue
		}
		if c.Role != genai.RoleModel {
			return fmt.Sprintf("contents[%d]: function calls must be in a model turn", i)
		}
		if first := calls[0]; strings.HasPrefix(string(first.ThoughtSignature), "fake-signature:") || first.FunctionCall.ID != "" {
			if string(first.ThoughtSignature) != string(Signature(first)) {
				return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. contents[%d].parts[0]", i)
			}
		}
		if i+1 >= len(contents) {
			return fmt.Sprintf("contents[%d]: function calls must be followed by their function responses", i)
		}
		var resps []*genai.FunctionResponse
		for _, p := range contents[i+1].Parts {
			if p.FunctionResponse != nil {
				resps = append(resps, p.FunctionResponse)
			}
		}
		if len(resps) != len(calls) {
			return fmt.Sprintf("Please ensure that the number of function response parts (%d) is equal to the number of function call parts (%d) of the function call turn.", len(resps), len(calls))
		}
		for j, r := range resps {
			fc := calls[j].FunctionCall
			if r.Name != fc.Name || r.ID != fc.ID {
				return fmt.Sprintf("contents[%d].parts[%d]: function response %s (id %q) does not answer function call %s (id %q)", i+1, j, r.Name, r.ID, fc.Name, fc.ID)
			}
		}
	}
	return ""
}

func hasCall(c *genai.Content, r *genai.FunctionResponse) bool {
	for _, p := range c.Parts {
		if p.FunctionCall != nil && p.FunctionCall.Name == r.Name && p.FunctionCall.ID == r.ID {
			return true
		}
	}
	return false
}

// parts returns the turn's parts: a thought, text, then the calls, the
// first call signed (and, with SignText, the text too).
func (t Turn) parts() []map[string]any {
	var out []map[string]any
	if t.Thought != "" {
		out = append(out, map[string]any{"text": t.Thought, "thought": true})
	}
	if t.Text != "" {
		p := map[string]any{"text": t.Text}
		if t.SignText && len(t.Calls) == 0 {
			p["thoughtSignature"] = Signature(&genai.Part{Text: t.Text})
		}
		out = append(out, p)
	}
	for i, c := range t.Calls {
		out = append(out, c.part(i == 0))
	}
	return out
}

func (c Call) args() map[string]any {
	var args map[string]any
	if c.Args != "" {
		_ = json.Unmarshal([]byte(c.Args), &args)
	}
	return args
}

func (c Call) part(signed bool) map[string]any {
	fc := map[string]any{"name": c.Name}
	if args := c.args(); args != nil {
		fc["args"] = args
	}
	if c.ID != "" {
		fc["id"] = c.ID
	}
	p := map[string]any{"functionCall": fc}
	if signed {
		p["thoughtSignature"] = Signature(&genai.Part{FunctionCall: &genai.FunctionCall{Name: c.Name, Args: c.args()}})
	}
	return p
}

func (t Turn) finish() string {
	if t.FinishReason != "" {
		return t.FinishReason
	}
	return "STOP"
}

// usage is cumulative usage after n output tokens.
func usage(n int) map[string]any {
	return map[string]any{"promptTokenCount": 11, "candidatesTokenCount": n, "totalTokenCount": 11 + n}
}

func response(t Turn, responseID, model string) map[string]any {
	resp := map[string]any{"modelVersion": model}
	if responseID != "" {
		resp["responseId"] = responseID
	}
	if t.BlockReason != "" {
		resp["promptFeedback"] = map[string]any{"blockReason": t.BlockReason}
		resp["usageMetadata"] = usage(0)
		return resp
	}
	cand := map[string]any{"finishReason": t.finish(), "index": 0}
	if ps := t.parts(); len(ps) > 0 {
		cand["content"] = map[string]any{"role": "model", "parts": ps}
	}
	if t.FinishMessage != "" {
		cand["finishMessage"] = t.FinishMessage
	}
	resp["candidates"] = []any{cand}
	resp["usageMetadata"] = usage(len(t.parts()) * 5)
	return resp
}

// streamChunks returns the turn's chunks and the error to end with, if any.
func streamChunks(t Turn, responseID, model string) ([]map[string]any, *Error) {
	if t.BlockReason != "" {
		return []map[string]any{response(t, responseID, model)}, nil
	}
	var groups [][]map[string]any
	if t.Thought != "" {
		groups = append(groups, []map[string]any{{"text": t.Thought, "thought": true}})
	}
	words := fakeapi.Chunks(t.Text)
	for i, w := range words {
		p := map[string]any{"text": w}
		if t.SignText && len(t.Calls) == 0 && i == len(words)-1 {
			p["thoughtSignature"] = Signature(&genai.Part{Text: w})
		}
		groups = append(groups, []map[string]any{p})
	}
	var calls []map[string]any
	for i, c := range t.Calls {
		switch {
		case t.StreamArgs:
			groups = append(groups, c.streamed(i == 0)...)
		case t.OneChunk:
			calls = append(calls, c.part(i == 0))
		default:
			groups = append(groups, []map[string]any{c.part(i == 0)})
		}
	}
	if len(calls) > 0 {
		groups = append(groups, calls)
	}
	if t.SignText && len(t.Calls) == 0 {
		groups = append(groups, []map[string]any{{"text": "", "thoughtSignature": Signature(&genai.Part{})}})
	}
	out := make([]map[string]any, 0, len(groups)+1)
	for i, g := range groups {
		c := map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": g}, "index": 0}},
			"usageMetadata": usage((i + 1) * 5), "modelVersion": model}
		if responseID != "" {
			c["responseId"] = responseID
		}
		out = append(out, c)
	}
	if t.StreamError != nil {
		return out, t.StreamError
	}
	last := map[string]any{"finishReason": t.finish(), "index": 0}
	if t.FinishMessage != "" {
		last["finishMessage"] = t.FinishMessage
	}
	if len(out) > 0 {
		// The finish reason rides on the last content chunk, as Gemini
		// sends it.
		out[len(out)-1]["candidates"].([]any)[0].(map[string]any)["finishReason"] = t.finish()
		if t.FinishMessage != "" {
			out[len(out)-1]["candidates"].([]any)[0].(map[string]any)["finishMessage"] = t.FinishMessage
		}
		return out, nil
	}
	only := map[string]any{"candidates": []any{last}, "usageMetadata": usage(0), "modelVersion": model}
	if responseID != "" {
		only["responseId"] = responseID
	}
	return []map[string]any{only}, nil
}

// streamed is a call as Vertex streams its arguments: an opening part (name,
// willContinue, the signature), a piece per member (strings in two), and
// an empty functionCall closing it.
func (c Call) streamed(signed bool) [][]map[string]any {
	open := map[string]any{"name": c.Name, "willContinue": true}
	if c.ID != "" {
		open["id"] = c.ID
	}
	first := map[string]any{"functionCall": open}
	if signed {
		first["thoughtSignature"] = Signature(&genai.Part{FunctionCall: &genai.FunctionCall{Name: c.Name, Args: c.args()}})
	}
	out := [][]map[string]any{{first}}
	var pieces []map[string]any
	for k, v := range c.args() {
		path := "$." + k
		switch x := v.(type) {
		case string:
			for _, h := range fakeapi.Halves(x) {
				pieces = append(pieces, map[string]any{"jsonPath": path, "stringValue": h, "willContinue": true})
			}
			pieces = append(pieces, map[string]any{"jsonPath": path, "stringValue": ""})
		case float64:
			pieces = append(pieces, map[string]any{"jsonPath": path, "numberValue": x})
		case bool:
			pieces = append(pieces, map[string]any{"jsonPath": path, "boolValue": x})
		case nil:
			pieces = append(pieces, map[string]any{"jsonPath": path, "nullValue": "NULL_VALUE"})
		}
	}
	for _, p := range pieces {
		out = append(out, []map[string]any{{"functionCall": map[string]any{"partialArgs": []any{p}, "willContinue": true}}})
	}
	return append(out, []map[string]any{{"functionCall": map[string]any{}}})
}

// refusal is a Google-style error reply.
func refusal(code int, status, msg string) *fakeapi.Refusal {
	return &fakeapi.Refusal{Status: code, Body: map[string]any{"error": Error{Code: code, Message: msg, Status: status}}}
}
