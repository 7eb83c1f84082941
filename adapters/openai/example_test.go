package tgopenai_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"description=Who to greet."`
}

// A hand-written agent loop over the official client: send the toolset as
// strict function tools, turn each function_call of the response into a
// guard call, dispatch it, and send the results back as
// function_call_output items until the model answers in text. The model
// here is an in-memory fake Responses server (package internal/fakemodel); with
// the real API, leave out the two options.
func Example() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "greet", Arguments: `{"name":"Ada"}`},
			{Name: "greet", Arguments: `{"name":42}`}, // the model gets a type wrong
		}},
		fakemodel.Turn{Text: "I greeted Ada."},
	)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))

	mr, _ := miniredis.Run() // any Redis will do: miniredis, a server, a cluster
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})
	greet := toolset.Read("greet", "Greet someone.", func(_ context.Context, _ *guard.Invocation, in greetIn) (string, error) {
		return "hello, " + in.Name, nil
	}, nil)

	tools := toolset.MustNew(greet)
	g := guard.New(tools, store, guard.Options{})
	user := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model

	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "any-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Greet Ada.")},
		Tools: tgopenai.Tools(tools),
	}
	for {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		calls := tgopenai.Calls(resp, tools.Tools())
		if len(calls) == 0 {
			fmt.Println("model says:", resp.OutputText())
			break
		}
		var outputs responses.ResponseInputParam
		for _, c := range calls {
			res := c.Answer // a call that must not run (incomplete, custom) is answered as it is
			if res == nil {
				if res, err = g.Dispatch(ctx, tgopenai.Call(user, "conversation-1", resp.ID, c)); err != nil {
					fmt.Println("error:", err) // the host's mistake (a bad principal), not the model's
					return
				}
			}
			detail := string(res.Data)
			if res.Code != guard.CodeOK {
				detail = res.Message
			}
			fmt.Printf("%s(%s) -> %s %s\n", c.Name, c.Arguments, res.Code, detail)
			outputs = append(outputs, tgopenai.Output(c, res))
		}
		params.PreviousResponseID = oai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}

	first := srv.Requests()[0].Tools[0]
	fmt.Printf("tool sent: %s, strict %t\n", first.Name, *first.Strict)
	// Output:
	// greet({"name":"Ada"}) -> OK "hello, Ada"
	// greet({"name":42}) -> INVALID_ARGUMENTS The arguments do not match the tool's schema: at /name: got number, want string.
	// model says: I greeted Ada.
	// tool sent: greet, strict true
}
