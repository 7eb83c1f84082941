package tgchat_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgchat "github.com/toolguard/toolguard/adapters/chat"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"description=Who to greet."`
}

// A hand-written Chat Completions loop: send the toolset as strict function
// tools, dispatch each tool call of the assistant message through the
// guard, and answer each with a role "tool" message until the model answers
// in text. The model is a fake server (package internal/fakemodel) that keeps
// nothing, so every request carries the whole conversation; with the real
// API, leave out the two options.
func Example() {
	srv := fakemodel.NewChat(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "greet", Arguments: `{"name":"Ada"}`},
			{Name: "greet", Arguments: `{"name":42}`}, // the model gets a type wrong
		}},
		fakemodel.Turn{Text: "I greeted Ada."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))

	mr, _ := miniredis.Run()
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})
	tools := toolset.MustNew(toolset.Read("greet", "Greet someone.", func(_ context.Context, _ *guard.Invocation, in greetIn) (string, error) {
		return "hello, " + in.Name, nil
	}, nil))
	g := guard.New(tools, store, guard.Options{})
	user := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model

	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "any-model", Tools: tgchat.Tools(tools),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Greet Ada.")}}
	for {
		comp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		msg := comp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			fmt.Println("model says:", msg.Content)
			break
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for i, c := range tgchat.Calls(msg, tools.Tools()) {
			fc := msg.ToolCalls[i].AsFunction() // as the model sent it
			res, err := g.Dispatch(ctx, tgchat.Call(user, "conversation-1", comp.ID, c))
			if err != nil { // the host's mistake (a bad principal), not the model's
				fmt.Println("error:", err)
				return
			}
			fmt.Printf("%s(%s) -> %s\n", fc.Function.Name, fc.Function.Arguments, res.Code)
			params.Messages = append(params.Messages, tgchat.Output(c, res))
		}
	}
	fmt.Println("tool messages sent:", len(srv.Requests()[1].ToolResults()))
	// Output:
	// greet({"name":"Ada"}) -> OK
	// greet({"name":42}) -> INVALID_ARGUMENTS
	// model says: I greeted Ada.
	// tool messages sent: 2
}
