package tganthropic_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/redis/go-redis/v9"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type greetIn struct {
	Name     string  `json:"name" jsonschema:"description=Who to greet."`
	Greeting *string `json:"greeting" jsonschema:"description=The greeting; hello by default."`
}

// A hand-written Messages loop: send the toolset, dispatch each tool_use
// block through the guard, and answer them all in one user message of
// tool_result blocks (is_error where the code is not OK) until the model
// answers in text. The model leaves out the optional greeting, which reads
// as null. The model is a fake server (package internal/fakemodel); with the
// real API, leave out the two options.
func Example() {
	srv := fakemodel.NewAnthropic(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "greet", Arguments: `{"name":"Ada"}`},
			{Name: "greet", Arguments: `{"name":42}`}, // the model gets a type wrong
		}},
		fakemodel.Turn{Text: "I greeted Ada."},
	)
	defer srv.Close()
	client := sdk.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))

	mr, _ := miniredis.Run()
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})
	tools := toolset.MustNew(toolset.Read("greet", "Greet someone.", func(_ context.Context, _ *guard.Invocation, in greetIn) (string, error) {
		greeting := "hello"
		if in.Greeting != nil {
			greeting = *in.Greeting
		}
		return greeting + ", " + in.Name, nil
	}, nil))
	g := guard.New(tools, store, guard.Options{})
	user := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model

	ctx := context.Background()
	params := sdk.MessageNewParams{Model: "any-model", MaxTokens: 1024, Tools: tganthropic.Tools(tools),
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Greet Ada."))}}
	for {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if msg.StopReason != sdk.StopReasonToolUse {
			fmt.Println("model says:", msg.Content[0].Text)
			break
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var results []sdk.ContentBlockParamUnion
		for _, c := range tganthropic.Calls(msg, tools.Tools()) {
			res, err := g.Dispatch(ctx, tganthropic.Call(user, "conversation-1", msg.ID, c))
			if err != nil { // the host's mistake (a bad principal), not the model's
				fmt.Println("error:", err)
				return
			}
			detail := string(res.Data)
			if res.Code != guard.CodeOK {
				detail = res.Message
			}
			fmt.Printf("%s(%s) -> %s %s\n", c.Name, input(msg, c.ID), res.Code, detail)
			results = append(results, tganthropic.Output(c, res))
		}
		params.Messages = append(params.Messages, tganthropic.Outputs(results...))
	}
	for _, r := range srv.Requests()[1].ToolResults() {
		fmt.Println("tool_result is_error:", r.IsError)
	}
	// Output:
	// greet({"name":"Ada"}) -> OK "hello, Ada"
	// greet({"name":42}) -> INVALID_ARGUMENTS The arguments do not match the tool's schema: at /name: got number, want string.
	// model says: I greeted Ada.
	// tool_result is_error: false
	// tool_result is_error: true
}

// input is the input of the message's tool_use block with id, as the
// model sent it.
func input(msg *sdk.Message, id string) string {
	for _, b := range msg.Content {
		if b.ID == id {
			return string(b.Input)
		}
	}
	return ""
}
