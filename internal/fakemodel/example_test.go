package fakemodel_test

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolguard/toolguard/internal/fakemodel"
)

// Example scripts a model that first calls a tool and then answers, and runs
// a minimal agent loop against it with the real openai-go client.
func Example() {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "add", Arguments: `{"a":2,"b":3}`, CallID: "call_add"}}},
		fakemodel.Turn{Text: "2 + 3 = 5"},
	)
	defer srv.Close()

	client := openai.NewClient(
		option.WithBaseURL(srv.BaseURL()),
		option.WithAPIKey("test"),
	)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 2 + 3?")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("add", map[string]any{
			"type": "object",
			"properties": map[string]any{
				"a": map[string]any{"type": "number"},
				"b": map[string]any{"type": "number"},
			},
		}, true)},
	}
	for {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		var outputs responses.ResponseInputParam
		for _, item := range resp.Output {
			if item.Type != "function_call" {
				continue
			}
			call := item.AsFunctionCall()
			fmt.Printf("model calls %s(%s)\n", call.Name, call.Arguments)
			out := responses.ResponseInputItemParamOfFunctionCallOutput("5")
			out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			outputs = append(outputs, out)
		}
		if len(outputs) == 0 {
			fmt.Println("model says:", resp.OutputText())
			break
		}
		params.PreviousResponseID = openai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}

	for i, req := range srv.Requests() {
		fmt.Printf("request %d: previous=%q outputs=%+v\n", i, req.PreviousResponseID, req.Results())
	}
	// Output:
	// model calls add({"a":2,"b":3})
	// model says: 2 + 3 = 5
	// request 0: previous="" outputs=[]
	// request 1: previous="resp_0001" outputs=[{CallID:call_add Output:5}]
}
