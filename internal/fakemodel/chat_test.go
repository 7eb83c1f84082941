package fakemodel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolguard/toolguard/internal/fakemodel"
)

func chatClient(srv *fakemodel.ChatServer) oai.Client {
	return oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// A scripted reply reads the same through the SDK streamed (accumulated)
// and not.
func TestChatReplyStreamedAndNot(t *testing.T) {
	turn := fakemodel.Turn{Text: "Let me look that up.", Calls: []fakemodel.Call{{CallID: "c1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}}
	srv := fakemodel.NewChat(turn, turn)
	defer srv.Close()
	c := chatClient(srv)
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}
	comp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	var acc oai.ChatCompletionAccumulator
	chunks := 0
	for s.Next() {
		acc.AddChunk(s.Current())
		chunks++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for i, c := range []oai.ChatCompletion{*comp, acc.ChatCompletion} {
		ch := c.Choices[0]
		if ch.Message.Content != turn.Text || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 ||
			ch.Message.ToolCalls[0].ID != "c1" || ch.Message.ToolCalls[0].Function.Arguments != turn.Calls[0].Arguments {
			t.Errorf("reply %d: %+v", i, ch)
		}
	}
	if chunks < 6 {
		t.Errorf("%d chunks: the text and arguments were not streamed in pieces", chunks)
	}
}

// A conversation the real API would refuse is refused without consuming a
// turn: a tool call left unanswered, a tool message answering nothing.
func TestChatConversationChecked(t *testing.T) {
	srv := fakemodel.NewChat(fakemodel.Turn{Text: "never"})
	defer srv.Close()
	c := chatClient(srv)
	asst := oai.ChatCompletionMessage{Role: "assistant", ToolCalls: []oai.ChatCompletionMessageToolCallUnion{{ID: "c1", Type: "function",
		Function: oai.ChatCompletionMessageFunctionToolCallFunction{Name: "f", Arguments: "{}"}}}}
	for name, msgs := range map[string][]oai.ChatCompletionMessageParamUnion{
		"unanswered": {oai.UserMessage("hi"), asst.ToParam(), oai.UserMessage("and?")},
		"stray":      {oai.UserMessage("hi"), oai.ToolMessage("{}", "c9")},
	} {
		_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "m", Messages: msgs})
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "tool") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("a refused request consumed a turn")
	}
}
