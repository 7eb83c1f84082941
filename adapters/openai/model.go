package tgopenai

import (
	"context"
	"encoding/json"
	"errors"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/adapters/internal/oaistream"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// DefaultModel is the model a Model asks for when ModelOptions.Name is "".
const DefaultModel = "gpt-5.4-mini"

// ModelOptions configures a Model. The zero value asks DefaultModel,
// chained by previous_response_id on a provider that stores responses.
type ModelOptions struct {
	// Name is the model; "" means DefaultModel.
	Name string
	// Stateless sends "store": false and asks for encrypted reasoning
	// items ("include": ["reasoning.encrypted_content"]): the provider
	// keeps nothing, the loop keeps the whole conversation, reasoning
	// included, and a paused run's state resumes anywhere.
	Stateless bool
	// Params adjusts every request before it is sent: any field the loop
	// does not set itself (parallel_tool_calls, tool_choice, reasoning,
	// max_output_tokens, temperature, metadata, include, ...).
	Params func(*responses.ResponseNewParams)
	// RequestOptions are passed to every request (headers, retries, ...).
	RequestOptions []option.RequestOption
}

// Model is the Responses API as package agentloop's provider.
type Model struct {
	client oai.Client
	opts   ModelOptions
}

var _ provider.Provider = (*Model)(nil)

// NewModel returns the Responses API over the official client as a
// provider for agentloop.New.
func NewModel(client oai.Client, opts ModelOptions) *Model {
	if opts.Name == "" {
		opts.Name = DefaultModel
	}
	return &Model{client: client, opts: opts}
}

// Info implements provider.Provider.
func (m *Model) Info() provider.Info {
	return provider.Info{Provider: providerName, APIFamily: apiFamily, Revision: revision, Model: m.opts.Name}
}

// UserItem implements provider.Provider: a user message.
func (m *Model) UserItem(text string) json.RawMessage {
	return kit.Item(responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
}

// OutputItems implements provider.Provider: a function_call_output item
// per call, a custom_tool_call_output item for a custom tool call.
func (m *Model) OutputItems(outs []provider.Output) []json.RawMessage {
	items := make([]json.RawMessage, 0, len(outs))
	for _, o := range outs {
		if o.Kind == kindCustom {
			items = append(items, kit.Item(responses.ResponseInputItemParamOfCustomToolCallOutput(o.CallID, o.Result)))
			continue
		}
		items = append(items, kit.Item(outputItem(o.CallID, o.Result)))
	}
	return items
}

// Turn implements provider.Provider: one request, streamed when req.Text
// is set (the SDK's Responses stream events; the final response comes
// from response.completed, response.incomplete or response.failed).
func (m *Model) Turn(ctx context.Context, req provider.Request) (*provider.Reply, error) {
	params := responses.ResponseNewParams{Model: m.opts.Name, Tools: toolParams(req.Tools)}
	input := make([]responses.ResponseInputItemUnionParam, 0, len(req.Items))
	for _, it := range req.Items {
		input = append(input, param.Override[responses.ResponseInputItemUnionParam](it))
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	if req.Instructions != "" {
		params.Instructions = oai.String(req.Instructions)
	}
	if req.Chain != "" {
		params.PreviousResponseID = oai.String(req.Chain)
	}
	if m.opts.Stateless {
		params.Store = oai.Bool(false)
		params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	if m.opts.Params != nil {
		m.opts.Params(&params)
	}
	var resp *responses.Response
	var err error
	if req.Text == nil {
		resp, err = m.client.Responses.New(ctx, params, m.opts.RequestOptions...)
	} else {
		resp, err = m.stream(ctx, params, req)
	}
	if err != nil {
		return nil, apiError(err)
	}
	return m.reply(resp, req.Tools), nil
}

// stream reads a streamed response: text deltas to req.Text, each
// completed function call to req.Ready, the response from the event that
// ends it.
func (m *Model) stream(ctx context.Context, params responses.ResponseNewParams, req provider.Request) (*responses.Response, error) {
	s := m.client.Responses.NewStreaming(ctx, params, m.opts.RequestOptions...)
	defer s.Close()
	var resp, started *responses.Response
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			req.Text(ev.Delta)
		case "response.output_item.done":
			// A function call's arguments are complete here, before the
			// response is (provider.Request.Ready).
			if c, ok := itemCall(ev.Item, req.Tools); ok && c.Answer == nil && req.Ready != nil && started != nil {
				req.Ready(started.ID, c)
			}
		case "response.created", "response.in_progress":
			r := ev.Response
			started = &r
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			resp = &r
		case "error":
			// The documented flat error event ({"code","message"}),
			// which openai-go reads as an event: it ends the response
			// as the recorded nested one does.
			code := ev.Code
			if code == "" {
				code = "error"
			}
			return failedResponse(started, code, ev.Message), nil
		}
	}
	if err := s.Err(); err != nil {
		if failed, ok := streamFailure(err, started); ok {
			// The API reported an error inside the stream (an "error"
			// event, before response.failed): the response failed, for
			// the reason the API gave, and the run ends so.
			return failed, nil
		}
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("openai: the response stream ended without a final response")
	}
	return resp, nil
}

// reply reads a response: its text, its calls, how it ended, and its
// output as input items for a loop that keeps the conversation.
func (m *Model) reply(resp *responses.Response, tools []toolset.Declared) *provider.Reply {
	rep := &provider.Reply{ID: resp.ID, Model: resp.Model, InputTokens: resp.Usage.InputTokens,
		OutputTokens: resp.Usage.OutputTokens, Text: resp.OutputText(), Calls: Calls(resp, tools)}
	if m.opts.Stateless {
		for _, item := range resp.Output {
			rep.Items = append(rep.Items, json.RawMessage(item.RawJSON()))
		}
	} else {
		rep.Chain = resp.ID
	}
	switch resp.Status {
	case responses.ResponseStatusIncomplete:
		rep.End, rep.Reason = provider.EndIncomplete, resp.IncompleteDetails.Reason
		if rep.Reason == "content_filter" {
			rep.End = provider.EndRefused
		}
	case responses.ResponseStatusFailed:
		// The API's error, whether a stream's error event (streamFailure)
		// or a failed response, reaches the host as a provider.APIError.
		code := string(resp.Error.Code)
		if code == "" {
			code = string(resp.Status)
		}
		kit.Failed(rep, &provider.APIError{StatusCode: 200, Code: code, Message: resp.Error.Message})
	case responses.ResponseStatusCancelled:
		rep.End, rep.Reason = provider.EndFailed, string(resp.Status)
	default:
		if r := refusal(resp); r != "" {
			rep.End, rep.Reason = provider.EndRefused, "refusal"
		}
	}
	return rep
}

// refusal returns the text of the response's refusal parts, if any.
func refusal(resp *responses.Response) string {
	var out string
	for _, item := range resp.Output {
		if item.Type != "message" {
			continue
		}
		for _, c := range item.Content {
			if c.Type == "refusal" {
				out += c.Refusal
			}
		}
	}
	return out
}

// apiError wraps an API error reply so that the loop's telemetry names
// its status.
func apiError(err error) error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		return kit.WrapError(err, apiErr.StatusCode)
	}
	return err
}

func toolParams(tools []toolset.Declared) []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		out = append(out, toolParam(t))
	}
	return out
}

// streamFailure reads an error event of a stream (openai-go stops at its
// first "error" payload, before the response.failed that follows) as the
// failed response it announces: the response that started, failed, with
// the API's error code (or type) and message.
func streamFailure(err error, started *responses.Response) (*responses.Response, bool) {
	apiErr, ok := oaistream.Failure(err)
	if !ok {
		return nil, false
	}
	return failedResponse(started, apiErr.Code, apiErr.Message), true
}

// failedResponse is the response that started (an empty one when none
// did), failed with the API's error code and message.
func failedResponse(started *responses.Response, code, message string) *responses.Response {
	resp := &responses.Response{}
	if started != nil {
		*resp = *started
	}
	resp.Status = responses.ResponseStatusFailed
	resp.Error = responses.ResponseError{Code: responses.ResponseErrorCode(code), Message: message}
	return resp
}
