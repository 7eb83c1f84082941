package tggemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// DefaultModel is the model a Model asks for when ModelOptions.Name is "".
const DefaultModel = "gemini-2.5-flash"

// ModelOptions configures a Model; the zero value asks DefaultModel.
type ModelOptions struct {
	// Name is the model; "" means DefaultModel.
	Name string
	// Config adjusts every request's configuration before it is sent: any
	// field the loop does not set itself (generation limits, thinking,
	// safety settings, tool config, HTTP options, ...). The loop sets
	// SystemInstruction and Tools.
	Config func(*genai.GenerateContentConfig)
}

// Model is the Gemini API (or Vertex AI, as the client is configured) as
// package agentloop's provider. The API keeps nothing, so the loop keeps
// the whole conversation.
type Model struct {
	client *genai.Client
	opts   ModelOptions
}

var _ provider.Provider = (*Model)(nil)

// NewModel returns generateContent over the official client as a provider
// for agentloop.New.
func NewModel(client *genai.Client, opts ModelOptions) *Model {
	if opts.Name == "" {
		opts.Name = DefaultModel
	}
	return &Model{client: client, opts: opts}
}

// Info implements provider.Provider.
func (m *Model) Info() provider.Info {
	i := info
	i.Model = m.opts.Name
	return i
}

// UserItem implements provider.Provider: a user content with one text part.
func (m *Model) UserItem(text string) json.RawMessage {
	return kit.Item(genai.NewContentFromText(text, genai.RoleUser))
}

// OutputItems implements provider.Provider: one user content of
// functionResponse parts, in order, each naming its function and echoing
// the call's id where Gemini sent one.
func (m *Model) OutputItems(outs []provider.Output) []json.RawMessage {
	ps := make([]*genai.Part, 0, len(outs))
	for _, o := range outs {
		id := o.CallID
		if o.Kind == kindDerived {
			id = ""
		}
		ps = append(ps, outputPart(id, o.Name, o.Result))
	}
	return []json.RawMessage{kit.Item(Outputs(ps...))}
}

// Turn implements provider.Provider: one generateContent request, streamed
// (streamGenerateContent) when req.Text is set, its chunks accumulated into
// one response. An error the API reports inside a stream after its first
// chunk ends the reply failed, with the error's status (e.g.
// "RESOURCE_EXHAUSTED") as the reason and a provider.APIError; before any
// chunk it is the request's error.
func (m *Model) Turn(ctx context.Context, req provider.Request) (*provider.Reply, error) {
	contents := make([]*genai.Content, 0, len(req.Items))
	for i, it := range req.Items {
		var c genai.Content
		if err := json.Unmarshal(it, &c); err != nil {
			return nil, fmt.Errorf("gemini: conversation item %d is not a content: %w", i, err)
		}
		contents = append(contents, &c)
	}
	config := &genai.GenerateContentConfig{Tools: toolParams(req.Tools)}
	if req.Instructions != "" {
		config.SystemInstruction = genai.NewContentFromText(req.Instructions, genai.RoleUser)
	}
	if m.opts.Config != nil {
		m.opts.Config(config)
	}
	acc := accumulator{ready: req.Ready, tools: req.Tools}
	if req.Text == nil {
		resp, err := m.client.Models.GenerateContent(ctx, m.opts.Name, contents, config)
		if err != nil {
			return nil, apiError(err)
		}
		acc.add(resp, nil)
	} else {
		seen := false
		for chunk, err := range m.client.Models.GenerateContentStream(ctx, m.opts.Name, contents, config) {
			if err != nil {
				var ge genai.APIError
				if seen && errors.As(err, &ge) {
					rep := m.reply(acc.identified(), req)
					return kit.Failed(rep, &provider.APIError{StatusCode: 200, Code: ge.Status, Message: ge.Message, Err: err}), nil
				}
				return nil, apiError(err)
			}
			seen = true
			acc.add(chunk, req.Text)
		}
		if !seen {
			return nil, errors.New("gemini: the stream ended before its first chunk")
		}
	}
	return m.reply(acc.identified(), req), nil
}

// identified returns the accumulated response, with an id when Gemini sent
// none (newResponseID).
func (a *accumulator) identified() *genai.GenerateContentResponse {
	resp := a.response()
	if resp.ResponseID == "" {
		resp.ResponseID = newResponseID()
	}
	return resp
}

// apiError wraps an error reply of the API as a provider.APIError.
func apiError(err error) error {
	var ge genai.APIError
	if errors.As(err, &ge) {
		return &provider.APIError{StatusCode: ge.Code, Code: ge.Status, Message: ge.Message, Err: err}
	}
	return err
}

// reply reads an accumulated response: its text, its calls, how it ended,
// and its content as the conversation item to send back.
func (m *Model) reply(resp *genai.GenerateContentResponse, req provider.Request) *provider.Reply {
	rep := &provider.Reply{ID: resp.ResponseID, Model: resp.ModelVersion, Calls: Calls(resp, req.Tools)}
	if rep.Model == "" {
		rep.Model = m.opts.Name
	}
	if u := resp.UsageMetadata; u != nil {
		rep.InputTokens = int64(u.PromptTokenCount)
		rep.OutputTokens = int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)
	}
	var text strings.Builder
	for _, p := range parts(resp) {
		if !p.Thought {
			text.WriteString(p.Text)
		}
	}
	rep.Text = text.String()
	if ps := parts(resp); len(ps) > 0 {
		rep.Items = []json.RawMessage{kit.Item(&genai.Content{Role: genai.RoleModel, Parts: ps})}
	}
	if len(resp.Candidates) == 0 {
		if fb := resp.PromptFeedback; fb != nil && fb.BlockReason != "" {
			rep.End, rep.Reason = provider.EndRefused, string(fb.BlockReason)
		} else {
			rep.End, rep.Reason = provider.EndFailed, "no_candidates"
		}
		return rep
	}
	switch reason := finishReason(resp); reason {
	case "", genai.FinishReasonStop, genai.FinishReasonUnspecified:
	case genai.FinishReasonMaxTokens:
		rep.End, rep.Reason = provider.EndIncomplete, string(reason)
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonProhibitedContent,
		genai.FinishReasonBlocklist, genai.FinishReasonSPII, genai.FinishReasonLanguage,
		genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		rep.End, rep.Reason = provider.EndRefused, string(reason)
	case genai.FinishReasonUnexpectedToolCall, genai.FinishReasonMalformedFunctionCall:
		// Calls are answered, never run (Calls); the model may call again.
		// Without a call there is nothing to answer, and the reply failed.
		if len(rep.Calls) == 0 {
			rep.End, rep.Reason = provider.EndFailed, string(reason)
		}
	default:
		rep.End, rep.Reason = provider.EndFailed, string(reason)
	}
	return rep
}

// accumulator gathers a response from its chunks: the first candidate's
// parts in order, as sent, with streamed arguments (partialArgs pieces,
// closed by an empty functionCall) assembled into one functionCall part;
// the last chunk's finish reason, usage (Gemini's counts are cumulative)
// and ids.
type accumulator struct {
	resp  genai.GenerateContentResponse
	cand  *genai.Candidate
	parts []*genai.Part
	open  *genai.Part    // the call whose arguments are streaming
	args  map[string]any // its arguments so far
	bad   bool           // a piece of them could not be placed

	// ready, when set, hears of each call as soon as its chunk (or, for
	// streamed arguments, its closing) arrives: provider.Request.Ready.
	ready   func(string, provider.ToolCall)
	tools   []toolset.Declared
	ncalls  int // function calls so far: the next one's position
	openPos int // the streaming call's position
}

// announce tells ready of the call fc at position, complete now.
func (a *accumulator) announce(position int, fc *genai.FunctionCall) {
	if a.ready == nil || fc.ID == "" && a.resp.ResponseID == "" {
		return
	}
	a.ready(a.resp.ResponseID, toolCall(a.resp.ResponseID, position, fc, a.tools))
}

func (a *accumulator) add(chunk *genai.GenerateContentResponse, text func(string)) {
	if chunk == nil {
		return
	}
	if chunk.ResponseID != "" {
		a.resp.ResponseID = chunk.ResponseID
	}
	if chunk.ModelVersion != "" {
		a.resp.ModelVersion = chunk.ModelVersion
	}
	if chunk.UsageMetadata != nil {
		a.resp.UsageMetadata = chunk.UsageMetadata
	}
	if chunk.PromptFeedback != nil {
		a.resp.PromptFeedback = chunk.PromptFeedback
	}
	if len(chunk.Candidates) == 0 || chunk.Candidates[0] == nil {
		return
	}
	c := chunk.Candidates[0]
	if a.cand == nil {
		a.cand = &genai.Candidate{}
	}
	if c.FinishReason != "" {
		a.cand.FinishReason = c.FinishReason
	}
	if c.FinishMessage != "" {
		a.cand.FinishMessage = c.FinishMessage
	}
	if c.SafetyRatings != nil {
		a.cand.SafetyRatings = c.SafetyRatings
	}
	if c.Content == nil {
		return
	}
	for _, p := range c.Content.Parts {
		if p == nil {
			continue
		}
		if p.FunctionCall != nil && a.streamed(p) {
			continue
		}
		if text != nil && p.Text != "" && !p.Thought {
			text(p.Text)
		}
		a.parts = append(a.parts, p)
		if p.FunctionCall != nil {
			a.ncalls++
			a.announce(a.ncalls-1, p.FunctionCall)
		}
	}
}

// streamed takes a part of a call whose arguments stream (Vertex's
// streamFunctionCallArguments) and reports whether it was one: the call's
// opening (a name, willContinue, no arguments), a piece of its arguments,
// or its closing (an empty functionCall).
func (a *accumulator) streamed(p *genai.Part) bool {
	fc := p.FunctionCall
	switch {
	case a.open == nil && fc.Name != "" && fc.WillContinue != nil && *fc.WillContinue && len(fc.Args) == 0 && len(fc.PartialArgs) == 0:
		opened := *p
		opened.FunctionCall = &genai.FunctionCall{ID: fc.ID, Name: fc.Name}
		a.open, a.args, a.bad = &opened, map[string]any{}, false
		a.parts = append(a.parts, a.open)
		a.openPos = a.ncalls
		a.ncalls++
		return true
	case a.open == nil && fc.Name == "" && len(fc.Args) == 0 && len(fc.PartialArgs) == 0:
		return true // a closing with nothing open: no call
	case a.open != nil && fc.Name == "" && len(fc.Args) == 0:
		for _, pa := range fc.PartialArgs {
			if !setPartial(a.args, pa) {
				a.bad = true
			}
		}
		if len(fc.PartialArgs) == 0 && (fc.WillContinue == nil || !*fc.WillContinue) {
			a.close()
		}
		return true
	}
	return false
}

// close ends the call whose arguments streamed. Arguments whose pieces
// could not be placed are left out whole, and the guard answers the call
// INVALID_ARGUMENTS (a required member is missing) rather than run it on
// a guess.
func (a *accumulator) close() {
	if a.open == nil {
		return
	}
	if !a.bad {
		a.open.FunctionCall.Args = a.args
	} else {
		a.open.FunctionCall.Args = map[string]any{}
	}
	fc := a.open.FunctionCall
	a.open, a.args = nil, nil
	a.announce(a.openPos, fc)
}

// setPartial places one streamed argument piece at its jsonPath: "$.name"
// or "$.a.b" (objects only). A string piece is appended to what the path
// holds; a number, bool or null sets it. It reports false for a path it
// cannot place.
func setPartial(args map[string]any, pa *genai.PartialArg) bool {
	path, ok := strings.CutPrefix(pa.JsonPath, "$.")
	if !ok || path == "" || strings.ContainsAny(path, "[]") {
		return false
	}
	keys := strings.Split(path, ".")
	obj := args
	for _, k := range keys[:len(keys)-1] {
		next, ok := obj[k].(map[string]any)
		if !ok {
			if _, exists := obj[k]; exists {
				return false
			}
			next = map[string]any{}
			obj[k] = next
		}
		obj = next
	}
	last := keys[len(keys)-1]
	switch {
	case pa.NumberValue != nil:
		obj[last] = *pa.NumberValue
	case pa.BoolValue != nil:
		obj[last] = *pa.BoolValue
	case pa.NULLValue != "":
		obj[last] = nil
	default:
		s, _ := obj[last].(string)
		obj[last] = s + pa.StringValue
	}
	return true
}

// response returns the accumulated response.
func (a *accumulator) response() *genai.GenerateContentResponse {
	a.close()
	resp := a.resp
	if a.cand != nil {
		c := *a.cand
		c.Content = &genai.Content{Role: genai.RoleModel, Parts: a.parts}
		resp.Candidates = []*genai.Candidate{&c}
	}
	return &resp
}
