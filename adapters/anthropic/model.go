package tganthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/tidwall/gjson"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/provider"
)

// DefaultModel is the model a Model asks for when ModelOptions.Name is "".
const DefaultModel = string(sdk.ModelClaudeSonnet4_6)

// DefaultMaxTokens is the max_tokens a Model sends when
// ModelOptions.MaxTokens is 0 (the API requires one).
const DefaultMaxTokens = 4096

// ModelOptions configures a Model; the zero value asks DefaultModel for at
// most DefaultMaxTokens.
type ModelOptions struct {
	// Name is the model; "" means DefaultModel.
	Name string
	// MaxTokens bounds each reply; 0 means DefaultMaxTokens.
	MaxTokens int64
	// Params adjusts every request before it is sent: any field the loop
	// does not set itself (tool_choice, thinking, temperature, metadata,
	// ...).
	Params func(*sdk.MessageNewParams)
	// RequestOptions are passed to every request (headers, retries, ...).
	RequestOptions []option.RequestOption
}

// Model is the Messages API as package agentloop's provider. The API keeps
// nothing, so the loop keeps the whole conversation.
type Model struct {
	client sdk.Client
	opts   ModelOptions
}

var _ provider.Provider = (*Model)(nil)

// NewModel returns the Messages API over the official client as a
// provider for agentloop.New.
func NewModel(client sdk.Client, opts ModelOptions) *Model {
	if opts.Name == "" {
		opts.Name = DefaultModel
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	return &Model{client: client, opts: opts}
}

// Info implements provider.Provider.
func (m *Model) Info() provider.Info {
	i := info
	i.Model = m.opts.Name
	return i
}

// UserItem implements provider.Provider: a user message.
func (m *Model) UserItem(text string) json.RawMessage {
	return kit.Item(sdk.NewUserMessage(sdk.NewTextBlock(text)))
}

// OutputItems implements provider.Provider: one user message of
// tool_result blocks, in order, is_error set where the code is not OK.
func (m *Model) OutputItems(outs []provider.Output) []json.RawMessage {
	blocks := make([]sdk.ContentBlockParamUnion, 0, len(outs))
	for _, o := range outs {
		blocks = append(blocks, sdk.NewToolResultBlock(o.CallID, o.Result, !o.OK))
	}
	return []json.RawMessage{kit.Item(Outputs(blocks...))}
}

// Turn implements provider.Provider: one request, streamed and accumulated
// with the SDK's Message.Accumulate when req.Text is set. stop_reason
// tool_use and end_turn end normally, pause_turn asks for another turn,
// max_tokens and model_context_window_exceeded are incomplete, refusal is
// refused.
func (m *Model) Turn(ctx context.Context, req provider.Request) (*provider.Reply, error) {
	params := sdk.MessageNewParams{Model: sdk.Model(m.opts.Name), MaxTokens: m.opts.MaxTokens, Tools: toolParams(req.Tools)}
	if req.Instructions != "" {
		params.System = []sdk.TextBlockParam{{Text: req.Instructions}}
	}
	for _, it := range req.Items {
		params.Messages = append(params.Messages, param.Override[sdk.MessageParam](it))
	}
	if m.opts.Params != nil {
		m.opts.Params(&params)
	}
	var msg *sdk.Message
	var failure *provider.APIError
	var err error
	if req.Text == nil {
		msg, err = m.client.Messages.New(ctx, params, m.opts.RequestOptions...)
	} else {
		msg, failure, err = m.stream(ctx, params, req)
	}
	if err != nil {
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) {
			err = kit.WrapError(err, apiErr.StatusCode)
		}
		return nil, err
	}
	if failure != nil {
		return kit.Failed(&provider.Reply{ID: msg.ID, Model: string(msg.Model), InputTokens: msg.Usage.InputTokens,
			OutputTokens: msg.Usage.OutputTokens, Text: text(msg)}, failure), nil
	}
	rep := &provider.Reply{ID: msg.ID, Model: string(msg.Model), InputTokens: msg.Usage.InputTokens,
		OutputTokens: msg.Usage.OutputTokens, Text: text(msg), Items: []json.RawMessage{kit.Item(msg.ToParam())},
		Reason: string(msg.StopReason)}
	switch msg.StopReason {
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		rep.End = provider.EndIncomplete
	case sdk.StopReasonRefusal:
		rep.End = provider.EndRefused
	case sdk.StopReasonPauseTurn:
		rep.Continue = true
	default:
		rep.Reason = ""
		rep.Calls = Calls(msg, req.Tools)
	}
	return rep, nil
}

// stream reads a streamed message: text deltas to req.Text, each complete
// tool_use block to req.Ready, the message from
// the accumulated events. An error event inside the stream (overloaded_error,
// api_error, ...), which the SDK ends the stream with, is returned as the
// failure, with the message as it stood before it.
//
// A tool_use block's input is the concatenation of its input_json_delta
// pieces, kept here as they came: the SDK's accumulator replaces the start
// block's input only when it is exactly "{}", and appends the pieces to
// any other spelling of the empty object (white space inside it), which
// leaves it invalid and, once the SDK repairs it, empty.
func (m *Model) stream(ctx context.Context, params sdk.MessageNewParams, req provider.Request) (*sdk.Message, *provider.APIError, error) {
	s := m.client.Messages.NewStreaming(ctx, params, m.opts.RequestOptions...)
	defer s.Close()
	var msg sdk.Message
	inputs := map[int64]*strings.Builder{}
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, nil, err
		}
		switch {
		case ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta":
			req.Text(ev.Delta.Text)
		case ev.Type == "content_block_stop" && ev.Index < int64(len(msg.Content)) && msg.Content[ev.Index].Type == "tool_use":
			// The block's input is complete here, before the message is
			// (provider.Request.Ready).
			if b := inputs[ev.Index]; b != nil && strings.TrimSpace(b.String()) != "" {
				setInput(&msg.Content[ev.Index], b.String())
				delete(inputs, ev.Index)
			}
			if req.Ready != nil && json.Valid(msg.Content[ev.Index].Input) {
				req.Ready(msg.ID, blockCall(msg.Content[ev.Index], req.Tools))
			}
		case ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta":
			b := inputs[ev.Index]
			if b == nil {
				b = &strings.Builder{}
				inputs[ev.Index] = b
			}
			b.WriteString(ev.Delta.PartialJSON)
		}
	}
	if err := s.Err(); err != nil {
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusOK {
			return &msg, eventFailure(apiErr.RawJSON(), err), nil
		}
		return nil, nil, err
	}
	if msg.ID == "" || msg.StopReason == "" {
		return nil, nil, errors.New("anthropic: the message stream ended before the message did")
	}
	for i, b := range inputs {
		if in := b.String(); i < int64(len(msg.Content)) && msg.Content[i].Type == "tool_use" && strings.TrimSpace(in) != "" {
			setInput(&msg.Content[i], in)
		}
	}
	return &msg, nil, nil
}

// setInput gives a tool_use block the input its deltas spelled, in its
// fields and in the raw JSON its ToParam sends back.
func setInput(b *sdk.ContentBlockUnion, input string) {
	if !json.Valid([]byte(input)) {
		// A cut-off input: the call is not run, and the block goes back
		// with the SDK's empty input.
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(b.RawJSON()), &fields) != nil {
		return
	}
	fields["input"] = json.RawMessage(input)
	raw, err := json.Marshal(fields)
	var fixed sdk.ContentBlockUnion
	if err == nil && fixed.UnmarshalJSON(raw) == nil {
		*b = fixed
	}
}

// eventFailure reads an error event's data ({"type":"error","error":{"type",
// "message"}}) as the API error that ended the stream; err is the SDK's
// error for it.
func eventFailure(data string, err error) *provider.APIError {
	e := gjson.Get(data, "error")
	return &provider.APIError{StatusCode: http.StatusOK, Code: e.Get("type").String(), Message: e.Get("message").String(), Err: err}
}
