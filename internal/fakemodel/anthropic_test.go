package fakemodel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolguard/toolguard/internal/fakemodel"
)

func anthropicClient(srv *fakemodel.AnthropicServer) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// A scripted reply reads the same through the SDK streamed (accumulated)
// and not.
func TestAnthropicReplyStreamedAndNot(t *testing.T) {
	turn := fakemodel.Turn{Text: "Let me look that up.", Calls: []fakemodel.Call{{CallID: "tu1", Name: "get_order", Arguments: `{"order_ref":"ORDER-7"}`}}}
	srv := fakemodel.NewAnthropic(turn, turn)
	defer srv.Close()
	c := anthropicClient(srv)
	ctx := context.Background()
	params := sdk.MessageNewParams{Model: "m", MaxTokens: 100, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))}}
	msg, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Messages.NewStreaming(ctx, params)
	var acc sdk.Message
	deltas := 0
	for s.Next() {
		ev := s.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" {
			deltas++
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for i, m := range []sdk.Message{*msg, acc} {
		if len(m.Content) != 2 || m.Content[0].Text != turn.Text || m.Content[1].ID != "tu1" ||
			string(m.Content[1].Input) != turn.Calls[0].Arguments || m.StopReason != sdk.StopReasonToolUse {
			t.Errorf("reply %d: %+v", i, m)
		}
	}
	if deltas < 6 {
		t.Errorf("%d deltas: the text and input were not streamed in pieces", deltas)
	}
}

// A conversation the real API would refuse is refused without consuming a
// turn: a tool_use left unanswered, a tool_result answering nothing.
func TestAnthropicConversationChecked(t *testing.T) {
	srv := fakemodel.NewAnthropic(fakemodel.Turn{Text: "never"})
	defer srv.Close()
	c := anthropicClient(srv)
	user := sdk.NewUserMessage(sdk.NewTextBlock("hi"))
	asst := sdk.NewAssistantMessage(sdk.NewToolUseBlock("tu1", map[string]any{}, "f"))
	for name, msgs := range map[string][]sdk.MessageParam{
		"unanswered": {user, asst, sdk.NewUserMessage(sdk.NewTextBlock("and?"))},
		"stray":      {user, asst, sdk.NewUserMessage(sdk.NewToolResultBlock("tu9", "{}", false))},
	} {
		_, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "m", MaxTokens: 10, Messages: msgs})
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "tool_") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("a refused request consumed a turn")
	}
}
