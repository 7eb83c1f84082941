package tgchat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/tidwall/gjson"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/adapters/internal/oaistream"
	"github.com/toolguard/toolguard/provider"
)

// DefaultModel is the model a Model asks for when ModelOptions.Name is "".
const DefaultModel = "gpt-5.4-mini"

// ModelOptions configures a Model; the zero value asks DefaultModel.
type ModelOptions struct {
	// Name is the model; "" means DefaultModel.
	Name string
	// Params adjusts every request before it is sent: any field the loop
	// does not set itself (parallel_tool_calls, tool_choice,
	// reasoning_effort, max_completion_tokens, temperature, metadata, ...).
	Params func(*oai.ChatCompletionNewParams)
	// RequestOptions are passed to every request (headers, retries, ...).
	RequestOptions []option.RequestOption
}

// Model is the Chat Completions API as package agentloop's provider. The
// API keeps nothing, so the loop keeps the whole conversation.
type Model struct {
	client oai.Client
	opts   ModelOptions
}

var _ provider.Provider = (*Model)(nil)

// NewModel returns Chat Completions over the official client as a provider
// for agentloop.New.
func NewModel(client oai.Client, opts ModelOptions) *Model {
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

// UserItem implements provider.Provider: a user message.
func (m *Model) UserItem(text string) json.RawMessage { return kit.Item(oai.UserMessage(text)) }

// OutputItems implements provider.Provider: one role "tool" message per
// call, in order.
func (m *Model) OutputItems(outs []provider.Output) []json.RawMessage {
	items := make([]json.RawMessage, 0, len(outs))
	for _, o := range outs {
		items = append(items, kit.Item(oai.ToolMessage(o.Result, o.CallID)))
	}
	return items
}

// Turn implements provider.Provider: one request, streamed through the
// SDK's ChatCompletionAccumulator when req.Text is set. An error the server
// sends inside the stream (a chunk carrying "error") ends the reply failed
// with the error's code. A reasoning_content the server sends (Z.ai, Kimi,
// DeepSeek, vLLM) goes back unchanged on the assistant message, as those
// servers ask for tool-call turns.
func (m *Model) Turn(ctx context.Context, req provider.Request) (*provider.Reply, error) {
	params := oai.ChatCompletionNewParams{Model: m.opts.Name, Tools: toolParams(req.Tools)}
	if req.Instructions != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.Instructions))
	}
	for _, it := range req.Items {
		params.Messages = append(params.Messages, param.Override[oai.ChatCompletionMessageParamUnion](it))
	}
	if m.opts.Params != nil {
		m.opts.Params(&params)
	}
	var r *read
	var err error
	if req.Text == nil {
		var comp *oai.ChatCompletion
		comp, err = m.client.Chat.Completions.New(ctx, params, m.opts.RequestOptions...)
		if err == nil {
			r = &read{comp: comp}
			if len(comp.Choices) > 0 {
				r.reasoning = gjson.Get(comp.Choices[0].Message.RawJSON(), reasoningField).String()
			}
		}
	} else {
		params.StreamOptions.IncludeUsage = oai.Bool(true)
		r, err = m.stream(ctx, params, req.Text)
	}
	if err != nil {
		var apiErr *oai.Error
		if errors.As(err, &apiErr) {
			err = kit.WrapError(err, apiErr.StatusCode)
		}
		return nil, err
	}
	comp := r.comp
	rep := &provider.Reply{ID: comp.ID, Model: comp.Model, InputTokens: comp.Usage.PromptTokens,
		OutputTokens: comp.Usage.CompletionTokens}
	if r.failure != nil {
		if len(comp.Choices) > 0 {
			rep.Text = comp.Choices[0].Message.Content
		}
		return kit.Failed(rep, r.failure), nil
	}
	if len(comp.Choices) == 0 {
		return nil, errors.New("chat: the completion has no choice")
	}
	ch := comp.Choices[0]
	msg := ch.Message.ToAssistantMessageParam()
	if r.reasoning != "" {
		msg.SetExtraFields(map[string]any{reasoningField: r.reasoning})
	}
	rep.Text, rep.Reason = ch.Message.Content, ch.FinishReason
	rep.Items = []json.RawMessage{kit.Item(oai.ChatCompletionMessageParamUnion{OfAssistant: &msg})}
	switch {
	case ch.FinishReason == "length":
		rep.End = provider.EndIncomplete
	case ch.FinishReason == "content_filter":
		rep.End = provider.EndRefused
	case ch.Message.Refusal != "":
		rep.End, rep.Reason = provider.EndRefused, "refusal"
	default:
		rep.Reason = ""
		rep.Calls = Calls(ch.Message, req.Tools)
	}
	return rep, nil
}

// reasoningField is the assistant message's reasoning text that
// OpenAI-compatible reasoning servers send and want back.
const reasoningField = "reasoning_content"

// read is what a completion's reading gave.
type read struct {
	comp *oai.ChatCompletion
	// reasoning is the first choice's reasoning_content, "" for none.
	reasoning string
	// failure, when set, is the error the server reported inside the
	// stream; comp then holds what came before it.
	failure *provider.APIError
}

// stream reads a streamed completion: text deltas of the first choice to
// text, the whole completion from the accumulator, with the last usage a
// chunk reported (servers send it on the finish chunk, a chunk of its own
// after it, or both, each time the whole count) and the first choice's
// reasoning_content deltas joined.
func (m *Model) stream(ctx context.Context, params oai.ChatCompletionNewParams, text func(string)) (*read, error) {
	s := m.client.Chat.Completions.NewStreaming(ctx, params, m.opts.RequestOptions...)
	defer s.Close()
	var acc oai.ChatCompletionAccumulator
	var usage *oai.CompletionUsage
	var reasoning strings.Builder
	for s.Next() {
		chunk := s.Current()
		if !acc.AddChunk(chunk) {
			return nil, errors.New("chat: a stream chunk could not be accumulated")
		}
		if chunk.JSON.Usage.Valid() {
			u := chunk.Usage
			usage = &u
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" {
				text(c.Delta.Content)
			}
			reasoning.WriteString(gjson.Get(c.Delta.RawJSON(), reasoningField).String())
		}
	}
	comp := acc.ChatCompletion
	if usage != nil {
		comp.Usage = *usage
	}
	r := &read{comp: &comp, reasoning: reasoning.String()}
	if err := s.Err(); err != nil {
		failure, ok := oaistream.Failure(err)
		if !ok {
			return nil, err
		}
		r.failure = failure
	}
	return r, nil
}
