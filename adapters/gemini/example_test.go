package tggemini_test

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/toolset"
)

type greetIn struct {
	Name     string  `json:"name" jsonschema:"description=Who to greet."`
	Greeting *string `json:"greeting" jsonschema:"description=The greeting; hello by default."`
}

// A hand-written generateContent loop: declare the toolset, dispatch each
// functionCall part through the guard, and answer them all in one user
// content of functionResponse parts until the model answers in text. The
// model sends no call ids (as Gemini 2.x does), so the adapter derives them
// from the response id and each call's position; it leaves out the
// optional greeting, which reads as null. The model is a fake server
// (package internal/fakemodel); with the real API, leave out HTTPOptions and set
// GEMINI_API_KEY.
func Example() {
	srv := fakemodel.NewGemini(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "greet", Arguments: `{"name":"Ada"}`},
			{Name: "greet", Arguments: `{"name":42}`}, // the model gets a type wrong
		}},
		fakemodel.Turn{Text: "I greeted Ada."},
	)
	defer srv.Close()
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "offline", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
	if err != nil {
		fmt.Println("error:", err)
		return
	}

	tools := toolset.MustNew(toolset.Read("greet", "Greet someone.", func(_ context.Context, _ *guard.Invocation, in greetIn) (string, error) {
		greeting := "hello"
		if in.Greeting != nil {
			greeting = *in.Greeting
		}
		return greeting + ", " + in.Name, nil
	}, nil))
	g := guard.New(tools, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
	user := guard.Principal{TenantID: "acme", SubjectID: "user-1"} // from your session, never the model

	config := &genai.GenerateContentConfig{Tools: tggemini.Tools(tools)}
	contents := []*genai.Content{genai.NewContentFromText("Greet Ada.", genai.RoleUser)}
	for {
		resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", contents, config)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		calls := resp.FunctionCalls()
		if len(calls) == 0 {
			fmt.Println("model says:", resp.Text())
			break
		}
		contents = append(contents, resp.Candidates[0].Content) // signatures and all
		var answers []*genai.Part
		for i, c := range tggemini.Calls(resp, tools.Tools()) {
			fc := calls[i] // as the model sent it
			call := tggemini.Call(user, "conversation-1", resp.ResponseID, c)
			res, err := g.Dispatch(ctx, call)
			if err != nil { // the host's mistake (a bad principal), not the model's
				fmt.Println("error:", err)
				return
			}
			detail := string(res.Data)
			if res.Code != guard.CodeOK {
				detail = res.Message
			}
			args, _ := json.Marshal(fc.Args)
			fmt.Printf("%s %s(%s) -> %s %s\n", call.Context.CallID, fc.Name, args, res.Code, detail)
			answers = append(answers, tggemini.Output(c, res)) // c.ID is derived here: none is sent back
		}
		contents = append(contents, tggemini.Outputs(answers...))
	}
	for _, r := range srv.Requests()[1].FunctionResponses() {
		fmt.Printf("functionResponse %s: code %v\n", r.Name, r.Response["code"])
	}
	// Output:
	// resp_0001/0 greet({"name":"Ada"}) -> OK "hello, Ada"
	// resp_0001/1 greet({"name":42}) -> INVALID_ARGUMENTS The arguments do not match the tool's schema: at /name: got number, want string.
	// model says: I greeted Ada.
	// functionResponse greet: code OK
	// functionResponse greet: code INVALID_ARGUMENTS
}
