// The Gemini API encoder: [NewGemini].
//
// A [GeminiServer] is a real HTTP server (net/http/httptest) playing a scripted
// model: every POST to /{version}/models/{model}:generateContent consumes
// the next [Turn] and is answered with a GenerateContentResponse in the
// Gemini API's wire format; :streamGenerateContent?alt=sse answers with
// server-sent events, a chunk per text word and, as gemini-2.5-pro and
// Gemini 3 do, a chunk per function call ([Turn.OneChunk] puts them in one
// chunk, as 2.5-flash and Vertex AI do; [Turn.StreamArgs] streams each
// call's arguments as Vertex's partialArgs pieces, closed by an empty
// functionCall). Usage counts are cumulative per chunk, as Gemini's are.
// The real google.golang.org/genai client talks to it through
// genai.HTTPOptions{BaseURL: [GeminiServer.URL]}; nothing is mocked above HTTP.
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

package fakemodel

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"
)

// Request is a request the server received, decoded.
type GeminiRequest struct {
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
func (r GeminiRequest) FunctionResponses() []*genai.FunctionResponse {
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
func (r GeminiRequest) ToolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// GeminiServer is a fake Gemini API server. It is safe for concurrent use.
// Close, Enqueue, Remaining and Requests (so far, in order) are those of
// every fake server.
type GeminiServer struct{ *gemServer }

// gemServer is the fake servers' core, embedded so that its methods are
// Server's own.
type gemServer = server[GeminiRequest]

// NewGemini starts a server playing turns in order; Close it when done.
func NewGemini(turns ...Turn) *GeminiServer {
	return &GeminiServer{newServer(turns, gemGemini)}
}

// BaseURL returns the base URL to pass as genai.HTTPOptions.BaseURL: the
// server root, e.g. "http://127.0.0.1:12345" (the SDK posts to
// /v1beta/models/{model}:generateContent under it).
func (s *GeminiServer) BaseURL() string { return s.URL() }

// Signature is the thoughtSignature the server gives the first function
// call (and, with SignText, text parts) of a reply: derived from the part,
// so the server can check it comes back unchanged without keeping state.
func GeminiSignature(p *genai.Part) []byte {
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

// gemGemini is the Gemini API's wire format.
var gemGemini = wireFormat[GeminiRequest]{Decode: gemDecode, Fail: gemFail, Reply: gemReply,
	Mark: func(r *GeminiRequest, status, _ int) { r.StatusCode = status }}

// gemDecode decodes a request, and refuses it as the real API does: a wrong
// route or method, no API key, a body that is not JSON, a malformed
// conversation.
func gemDecode(x *exchange[GeminiRequest]) (GeminiRequest, *refusal) {
	r := x.R
	req := GeminiRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: x.Body}
	model, method, ok := strings.Cut(r.URL.Path[strings.LastIndex(r.URL.Path, "/models/")+len("/models/"):], ":")
	if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/models/") || !ok ||
		(method != "generateContent" && method != "streamGenerateContent") {
		return req, gemRefusal(http.StatusNotFound, "NOT_FOUND", "no such method: "+r.Method+" "+r.URL.Path)
	}
	if r.Header.Get("x-goog-api-key") == "" && r.URL.Query().Get("key") == "" {
		return req, gemRefusal(http.StatusUnauthorized, "UNAUTHENTICATED", "API key not valid")
	}
	var wire struct {
		Contents          []*genai.Content `json:"contents"`
		SystemInstruction *genai.Content   `json:"systemInstruction"`
		Tools             []*genai.Tool    `json:"tools"`
	}
	if err := json.Unmarshal(x.Body, &wire); err != nil {
		return req, gemRefusal(http.StatusBadRequest, "INVALID_ARGUMENT", "invalid JSON payload: "+err.Error())
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
	if msg := gemCheck(wire.Contents); msg != "" {
		return req, gemRefusal(http.StatusBadRequest, "INVALID_ARGUMENT", msg)
	}
	return req, nil
}

// gemFail returns the error a turn's Status answers with.
func gemFail(t Turn, _ GeminiRequest) *refusal {
	if t.Status == 0 {
		return nil
	}
	return gemRefusal(t.Status, http.StatusText(t.Status), "scripted error")
}

// gemReply answers with the turn's response, or its chunks streamed, and
// logs when it was done.
func gemReply(x *exchange[GeminiRequest], t Turn, req GeminiRequest) {
	responseID := x.NewID("resp")
	if t.NoResponseID {
		responseID = ""
	}
	x.Reply(&req, false, req.Stream, gemResponse(t, responseID, req.Model), func(sse *eventStream) {
		gemWriteStream(sse, t, responseID, req.Model)
	})
	req.Done = time.Now()
	x.Log(req)
}

// gemWriteStream writes the turn's chunks, paced as it says; with a Hold,
// the finish reason rides alone, after it, and with a StreamError an
// error chunk ends the stream.
func gemWriteStream(sse *eventStream, t Turn, responseID, model string) {
	chunks, fail := gemStreamChunks(t, responseID, model)
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
		code, _ := strconv.Atoi(fail.Code)
		sse.Event("", map[string]any{"error": gemError{Code: code, Message: fail.Message, Status: fail.Type}})
	case finish != nil && sse.Hold(t.Hold):
		sse.Event("", finish)
	}
}

// gemCheck validates the conversation as the real API does; "" when valid.
func gemCheck(contents []*genai.Content) string {
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
			if p.FunctionResponse != nil && (i == 0 || !gemHasCall(contents[i-1], p.FunctionResponse)) {
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
			if string(first.ThoughtSignature) != string(GeminiSignature(first)) {
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

func gemHasCall(c *genai.Content, r *genai.FunctionResponse) bool {
	for _, p := range c.Parts {
		if p.FunctionCall != nil && p.FunctionCall.Name == r.Name && p.FunctionCall.ID == r.ID {
			return true
		}
	}
	return false
}

// gemParts returns the turn's parts: a thought, text, then the calls, the
// first call signed (and, with SignText, the text too).
func (t Turn) gemParts() []map[string]any {
	var out []map[string]any
	if t.Reasoning != "" {
		out = append(out, map[string]any{"text": t.Reasoning, "thought": true})
	}
	if t.Text != "" {
		p := map[string]any{"text": t.Text}
		if t.SignText && len(t.Calls) == 0 {
			p["thoughtSignature"] = GeminiSignature(&genai.Part{Text: t.Text})
		}
		out = append(out, p)
	}
	for i, c := range t.Calls {
		out = append(out, c.gemPart(i == 0))
	}
	return out
}

func (c Call) gemArgs() map[string]any {
	var args map[string]any
	if c.Arguments != "" {
		_ = json.Unmarshal([]byte(c.Arguments), &args)
	}
	return args
}

func (c Call) gemPart(signed bool) map[string]any {
	fc := map[string]any{"name": c.Name}
	if args := c.gemArgs(); args != nil {
		fc["args"] = args
	}
	if c.CallID != "" {
		fc["id"] = c.CallID
	}
	p := map[string]any{"functionCall": fc}
	if signed {
		p["thoughtSignature"] = GeminiSignature(&genai.Part{FunctionCall: &genai.FunctionCall{Name: c.Name, Args: c.gemArgs()}})
	}
	return p
}

func (t Turn) gemFinish() string {
	if t.Finish != "" {
		return t.Finish
	}
	return "STOP"
}

// gemUsage is cumulative usage after n output tokens.
func gemUsage(n int) map[string]any {
	return map[string]any{"promptTokenCount": 11, "candidatesTokenCount": n, "totalTokenCount": 11 + n}
}

func gemResponse(t Turn, responseID, model string) map[string]any {
	resp := map[string]any{"modelVersion": model}
	if responseID != "" {
		resp["responseId"] = responseID
	}
	if t.BlockReason != "" {
		resp["promptFeedback"] = map[string]any{"blockReason": t.BlockReason}
		resp["usageMetadata"] = gemUsage(0)
		return resp
	}
	cand := map[string]any{"finishReason": t.gemFinish(), "index": 0}
	if ps := t.gemParts(); len(ps) > 0 {
		cand["content"] = map[string]any{"role": "model", "parts": ps}
	}
	if t.FinishMessage != "" {
		cand["finishMessage"] = t.FinishMessage
	}
	resp["candidates"] = []any{cand}
	resp["usageMetadata"] = gemUsage(len(t.gemParts()) * 5)
	return resp
}

// gemStreamChunks returns the turn's chunks and the error to end with, if any.
func gemStreamChunks(t Turn, responseID, model string) ([]map[string]any, *Error) {
	if t.BlockReason != "" {
		return []map[string]any{gemResponse(t, responseID, model)}, nil
	}
	var groups [][]map[string]any
	if t.Reasoning != "" {
		groups = append(groups, []map[string]any{{"text": t.Reasoning, "thought": true}})
	}
	words := chunks(t.Text)
	for i, w := range words {
		p := map[string]any{"text": w}
		if t.SignText && len(t.Calls) == 0 && i == len(words)-1 {
			p["thoughtSignature"] = GeminiSignature(&genai.Part{Text: w})
		}
		groups = append(groups, []map[string]any{p})
	}
	var calls []map[string]any
	for i, c := range t.Calls {
		switch {
		case t.StreamArgs:
			groups = append(groups, c.gemStreamed(i == 0)...)
		case t.OneChunk:
			calls = append(calls, c.gemPart(i == 0))
		default:
			groups = append(groups, []map[string]any{c.gemPart(i == 0)})
		}
	}
	if len(calls) > 0 {
		groups = append(groups, calls)
	}
	if t.SignText && len(t.Calls) == 0 {
		groups = append(groups, []map[string]any{{"text": "", "thoughtSignature": GeminiSignature(&genai.Part{})}})
	}
	out := make([]map[string]any, 0, len(groups)+1)
	for i, g := range groups {
		c := map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": g}, "index": 0}},
			"usageMetadata": gemUsage((i + 1) * 5), "modelVersion": model}
		if responseID != "" {
			c["responseId"] = responseID
		}
		out = append(out, c)
	}
	if t.StreamError != nil {
		return out, t.StreamError
	}
	last := map[string]any{"finishReason": t.gemFinish(), "index": 0}
	if t.FinishMessage != "" {
		last["finishMessage"] = t.FinishMessage
	}
	if len(out) > 0 {
		// The finish reason rides on the last content chunk, as Gemini
		// sends it.
		out[len(out)-1]["candidates"].([]any)[0].(map[string]any)["finishReason"] = t.gemFinish()
		if t.FinishMessage != "" {
			out[len(out)-1]["candidates"].([]any)[0].(map[string]any)["finishMessage"] = t.FinishMessage
		}
		return out, nil
	}
	only := map[string]any{"candidates": []any{last}, "usageMetadata": gemUsage(0), "modelVersion": model}
	if responseID != "" {
		only["responseId"] = responseID
	}
	return []map[string]any{only}, nil
}

// gemStreamed is a call as Vertex streams its arguments: an opening part (name,
// willContinue, the signature), a piece per member (strings in two), and
// an empty functionCall closing it.
func (c Call) gemStreamed(signed bool) [][]map[string]any {
	open := map[string]any{"name": c.Name, "willContinue": true}
	if c.CallID != "" {
		open["id"] = c.CallID
	}
	first := map[string]any{"functionCall": open}
	if signed {
		first["thoughtSignature"] = GeminiSignature(&genai.Part{FunctionCall: &genai.FunctionCall{Name: c.Name, Args: c.gemArgs()}})
	}
	out := [][]map[string]any{{first}}
	var pieces []map[string]any
	for k, v := range c.gemArgs() {
		path := "$." + k
		switch x := v.(type) {
		case string:
			for _, h := range halves(x) {
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

// gemRefusal is a Google-style error reply.
func gemRefusal(code int, status, msg string) *refusal {
	return &refusal{Status: code, Body: map[string]any{"error": gemError{Code: code, Message: msg, Status: status}}}
}

// gemError is a Google API error: {"error": {"code", "message", "status"}}.
type gemError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

// Results returns the results of FunctionResponses: each
// functionResponse's id and response, as JSON.
func (r GeminiRequest) Results() []Result {
	var out []Result
	for _, f := range r.FunctionResponses() {
		b, _ := json.Marshal(f.Response)
		out = append(out, Result{CallID: f.ID, Output: string(b)})
	}
	return out
}
