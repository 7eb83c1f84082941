package tganthropic

import (
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/toolguard/toolguard/agentloop/provider"
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
	return provider.Item(sdk.NewUserMessage(sdk.NewTextBlock(text)))
}

// OutputItems implements provider.Provider: one user message of
// tool_result blocks, in order, is_error set where the code is not OK.
func (m *Model) OutputItems(outs []provider.Output) []json.RawMessage {
	blocks := make([]sdk.ContentBlockParamUnion, 0, len(outs))
	for _, o := range outs {
		blocks = append(blocks, sdk.NewToolResultBlock(o.CallID, o.Result, !o.OK))
	}
	return []json.RawMessage{provider.Item(Outputs(blocks...))}
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
	var err error
	if req.Text == nil {
		msg, err = m.client.Messages.New(ctx, params, m.opts.RequestOptions...)
	} else {
		msg, err = m.stream(ctx, params, req.Text)
	}
	if err != nil {
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) {
			err = provider.WrapError(err, apiErr.StatusCode)
		}
		return nil, err
	}
	rep := &provider.Reply{ID: msg.ID, Model: string(msg.Model), InputTokens: msg.Usage.InputTokens,
		OutputTokens: msg.Usage.OutputTokens, Text: text(msg), Items: []json.RawMessage{provider.Item(msg.ToParam())},
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

// stream reads a streamed message: text deltas to text, the message from
// the accumulated events.
func (m *Model) stream(ctx context.Context, params sdk.MessageNewParams, text func(string)) (*sdk.Message, error) {
	s := m.client.Messages.NewStreaming(ctx, params, m.opts.RequestOptions...)
	defer s.Close()
	var msg sdk.Message
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, err
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			text(ev.Delta.Text)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if msg.ID == "" || msg.StopReason == "" {
		return nil, errors.New("anthropic: the message stream ended before the message did")
	}
	return &msg, nil
}
