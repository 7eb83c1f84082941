package fakemodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolguard/toolguard/internal/fakemodel"
)

// newClient returns a real openai-go client pointed at srv.
func newClient(srv *fakemodel.OpenAIServer) *openai.Client {
	c := openai.NewClient(
		option.WithBaseURL(srv.BaseURL()),
		option.WithAPIKey("test"),
		option.WithMaxRetries(2),
	)
	return &c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

var weatherParams = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string"},
	},
	"required":             []string{"city"},
	"additionalProperties": false,
}

func userInput(text string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}
}

func functionCallOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *openai.Error, got %T: %v", err, err)
	}
	return apiErr
}

func TestTwoFunctionCalls(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Calls: []fakemodel.Call{
		{Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{Name: "get_weather", Arguments: `{"city":"Oslo"}`, CallID: "call_oslo"},
	}})
	defer srv.Close()
	client := newClient(srv)

	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:        openai.ChatModelGPT4o,
		Instructions: openai.String("be brief"),
		Input:        userInput("weather in Paris and Oslo?"),
		Tools: []responses.ToolUnionParam{
			responses.ToolParamOfFunction("get_weather", weatherParams, true),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || resp.Status != responses.ResponseStatusCompleted {
		t.Errorf("id %q status %q", resp.ID, resp.Status)
	}
	if resp.Model != openai.ChatModelGPT4o {
		t.Errorf("model %q", resp.Model)
	}
	if got := resp.OutputText(); got != "" {
		t.Errorf("OutputText = %q, want empty", got)
	}
	if resp.Usage.TotalTokens == 0 || !resp.ParallelToolCalls {
		t.Errorf("usage %+v parallel %v", resp.Usage.TotalTokens, resp.ParallelToolCalls)
	}
	if len(resp.Output) != 2 {
		t.Fatalf("got %d output items", len(resp.Output))
	}
	var calls []responses.ResponseFunctionToolCall
	for _, item := range resp.Output {
		if item.Type != "function_call" {
			t.Fatalf("item type %q", item.Type)
		}
		calls = append(calls, item.AsFunctionCall())
	}
	if calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris"}` ||
		!strings.HasPrefix(calls[0].CallID, "call_") || !strings.HasPrefix(calls[0].ID, "fc_") ||
		calls[0].Status != "completed" {
		t.Errorf("call 0: %+v", calls[0])
	}
	if calls[1].CallID != "call_oslo" || calls[1].Arguments != `{"city":"Oslo"}` || calls[1].ID == calls[0].ID {
		t.Errorf("call 1: %+v", calls[1])
	}
	// AsAny dispatches on type, too.
	if _, ok := resp.Output[0].AsAny().(responses.ResponseFunctionToolCall); !ok {
		t.Errorf("AsAny: %T", resp.Output[0].AsAny())
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/responses" || r.Model != "gpt-4o" || r.Instructions != "be brief" || r.Stream {
		t.Errorf("request: path %q model %q instructions %q stream %v", r.Path, r.Model, r.Instructions, r.Stream)
	}
	if len(r.Input) != 1 || r.Input[0].Type != "message" || r.Input[0].Role != "user" || r.Input[0].Text != "weather in Paris and Oslo?" {
		t.Errorf("input: %+v", r.Input)
	}
	if len(r.Tools) != 1 || r.Tools[0].Type != "function" || r.Tools[0].Name != "get_weather" ||
		r.Tools[0].Strict == nil || !*r.Tools[0].Strict {
		t.Fatalf("tools: %+v", r.Tools)
	}
	var schema map[string]any
	if err := json.Unmarshal(r.Tools[0].Parameters, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("parameters %s: %v", r.Tools[0].Parameters, err)
	}
	if got := r.ToolNames(); len(got) != 1 || got[0] != "get_weather" {
		t.Errorf("ToolNames = %v", got)
	}
	if r.Turn != 0 || r.StatusCode != 200 || r.ResponseID != resp.ID {
		t.Errorf("turn %d status %d response %q", r.Turn, r.StatusCode, r.ResponseID)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer test" {
		t.Errorf("Authorization = %q", got)
	}
	if srv.Remaining() != 0 {
		t.Errorf("remaining %d", srv.Remaining())
	}
}

func TestChainWithFunctionCallOutputs(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Calls: []fakemodel.Call{
			{Name: "get_weather", Arguments: `{"city":"Paris"}`, CallID: "call_a"},
			{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		}},
		fakemodel.Turn{Text: "Sunny in Paris, snow in Oslo."},
	)
	defer srv.Close()
	client := newClient(srv)

	first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: userInput("weather?"),
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherParams, true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var outputs responses.ResponseInputParam
	want := map[string]string{}
	for _, item := range first.Output {
		call := item.AsFunctionCall()
		out := "result for " + call.Arguments
		want[call.CallID] = out
		outputs = append(outputs, functionCallOutput(call.CallID, out))
	}

	second, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:              openai.ChatModelGPT4o,
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: outputs},
		Tools:              []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherParams, true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := second.OutputText(); got != "Sunny in Paris, snow in Oslo." {
		t.Errorf("OutputText = %q", got)
	}
	if second.PreviousResponseID != first.ID || second.ID == first.ID {
		t.Errorf("ids: first %q second %q prev %q", first.ID, second.ID, second.PreviousResponseID)
	}
	if len(second.Output) != 1 || second.Output[0].Type != "message" {
		t.Fatalf("output: %+v", second.Output)
	}
	msg := second.Output[0].AsMessage()
	if msg.Role != "assistant" || len(msg.Content) != 1 || msg.Content[0].Type != "output_text" ||
		msg.Content[0].Text != "Sunny in Paris, snow in Oslo." || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("message: %+v", msg)
	}

	r := srv.Requests()[1]
	if r.PreviousResponseID != first.ID || r.Turn != 1 {
		t.Errorf("previous_response_id %q turn %d", r.PreviousResponseID, r.Turn)
	}
	got := r.Results()
	if len(got) != 2 || got[0].CallID != "call_a" {
		t.Fatalf("FunctionCallOutputs = %+v", got)
	}
	for _, o := range got {
		if want[o.CallID] != o.Output {
			t.Errorf("output for %s = %q, want %q", o.CallID, o.Output, want[o.CallID])
		}
	}
	if len(r.Input[0].Raw) == 0 || r.Input[0].Type != "function_call_output" {
		t.Errorf("raw item: %+v", r.Input[0])
	}
}

func TestManualHistoryWithoutPreviousResponseID(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "ok"})
	defer srv.Close()
	client := newClient(srv)
	_, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_x", "get_weather"),
			functionCallOutput("call_x", "sunny"),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := srv.Requests()[0].Input
	if len(in) != 3 || in[0].Type != "message" || in[0].Text != "weather?" ||
		in[1].Type != "function_call" || in[1].Name != "get_weather" || in[1].Arguments != `{"city":"Paris"}` || in[1].CallID != "call_x" ||
		in[2].Type != "function_call_output" || in[2].Output != "sunny" {
		t.Errorf("input: %+v", in)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := fakemodel.NewOpenAI(
				fakemodel.Turn{Status: status},
				fakemodel.Turn{Text: "ok"},
			)
			defer srv.Close()
			start := time.Now()
			resp, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{
				Model: openai.ChatModelGPT4o,
				Input: userInput("hi"),
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.OutputText() != "ok" {
				t.Errorf("OutputText = %q", resp.OutputText())
			}
			if d := time.Since(start); d > 300*time.Millisecond {
				t.Errorf("retry took %v; retry-after-ms not honoured?", d)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			if reqs[0].StatusCode != status || reqs[0].Turn != 0 || reqs[0].ResponseID != "" {
				t.Errorf("first: status %d turn %d id %q", reqs[0].StatusCode, reqs[0].Turn, reqs[0].ResponseID)
			}
			if reqs[1].StatusCode != 200 || reqs[1].Turn != 1 || reqs[1].Header.Get("X-Stainless-Retry-Count") != "1" {
				t.Errorf("second: status %d turn %d retry %q", reqs[1].StatusCode, reqs[1].Turn, reqs[1].Header.Get("X-Stainless-Retry-Count"))
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Status: 503},
		fakemodel.Turn{Status: 500},
		fakemodel.Turn{Status: 429, Error: &fakemodel.Error{Message: "slow down", Code: "custom_code"}},
		fakemodel.Turn{Text: "never reached"},
	)
	defer srv.Close()
	_, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: userInput("hi"),
	})
	apiErr := apiError(t, err)
	if apiErr.StatusCode != 429 || apiErr.Message != "slow down" || apiErr.Code != "custom_code" || apiErr.Type != "requests" {
		t.Errorf("error: %d %q %q %q", apiErr.StatusCode, apiErr.Message, apiErr.Code, apiErr.Type)
	}
	if n := len(srv.Requests()); n != 3 || srv.Remaining() != 1 {
		t.Errorf("%d requests, %d remaining", n, srv.Remaining())
	}
}

func TestNoRetryHeader(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Status: 500, Header: http.Header{"x-should-retry": {"false"}}},
		fakemodel.Turn{Text: "not reached"},
	)
	defer srv.Close()
	_, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: userInput("hi"),
	})
	if apiErr := apiError(t, err); apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Errorf("error: %d %q", apiErr.StatusCode, apiErr.Type)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestUnknownPreviousResponseID(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "unused"})
	defer srv.Close()
	_, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{
		Model:              openai.ChatModelGPT4o,
		PreviousResponseID: openai.String("resp_bogus"),
		Input:              userInput("hi"),
	})
	apiErr := apiError(t, err)
	if apiErr.StatusCode != 400 || apiErr.Code != "previous_response_not_found" ||
		apiErr.Param != "previous_response_id" || apiErr.Type != "invalid_request_error" ||
		!strings.Contains(apiErr.Message, "resp_bogus") {
		t.Errorf("error: %d %q %q %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.Type, apiErr.Message)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].StatusCode != 400 || reqs[0].Turn != -1 || reqs[0].PreviousResponseID != "resp_bogus" {
		t.Errorf("requests: %+v", reqs)
	}
	if srv.Remaining() != 1 {
		t.Errorf("a rejected request consumed a turn")
	}
}

func TestStoreFalseCannotBeChained(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "a"}, fakemodel.Turn{Text: "b"})
	defer srv.Close()
	client := newClient(srv)
	first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: openai.ChatModelGPT4o,
		Input: userInput("hi"),
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.RawJSON(), `"store":false`) {
		t.Errorf("store not echoed as false: %s", first.RawJSON())
	}
	_, err = client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:              openai.ChatModelGPT4o,
		PreviousResponseID: openai.String(first.ID),
		Input:              userInput("again"),
	})
	if apiErr := apiError(t, err); apiErr.StatusCode != 400 || apiErr.Code != "previous_response_not_found" {
		t.Errorf("error: %d %q", apiErr.StatusCode, apiErr.Code)
	}
}

func TestToolOutputValidation(t *testing.T) {
	script := func() []fakemodel.Turn {
		return []fakemodel.Turn{
			{Calls: []fakemodel.Call{{Name: "a", Arguments: "{}", CallID: "call_1"}, {Name: "b", Arguments: "{}", CallID: "call_2"}}},
			{Text: "fine"},
		}
	}
	cases := []struct {
		name    string
		input   responses.ResponseInputParam
		message string
	}{
		{"missing output", responses.ResponseInputParam{functionCallOutput("call_1", "x")}, "No tool output found for function call call_2."},
		{"unknown call id", responses.ResponseInputParam{functionCallOutput("call_1", "x"), functionCallOutput("call_2", "y"), functionCallOutput("call_9", "z")}, "No tool call found for function call output with call_id call_9."},
		{"no call id", responses.ResponseInputParam{responses.ResponseInputItemParamOfFunctionCallOutput("x")}, "Missing required parameter: 'input[0].call_id'."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakemodel.NewOpenAI(script()...)
			defer srv.Close()
			client := newClient(srv)
			first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("go")})
			if err != nil {
				t.Fatal(err)
			}
			next := responses.ResponseNewParams{
				Model:              "m",
				PreviousResponseID: openai.String(first.ID),
				Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: tc.input},
			}
			_, err = client.Responses.New(ctx(t), next)
			if apiErr := apiError(t, err); apiErr.StatusCode != 400 || apiErr.Message != tc.message {
				t.Errorf("error: %d %q", apiErr.StatusCode, apiErr.Message)
			}
			if srv.Remaining() != 1 {
				t.Errorf("rejected request consumed a turn")
			}

			srv.SetValidateToolOutputs(false)
			resp, err := client.Responses.New(ctx(t), next)
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if resp.OutputText() != "fine" {
				t.Errorf("OutputText = %q", resp.OutputText())
			}
		})
	}
}

func TestEmptyResponse(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Empty: true, Text: "ignored"}, fakemodel.Turn{})
	defer srv.Close()
	client := newClient(srv)
	for i := range 2 {
		resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != "completed" || len(resp.Output) != 0 || resp.OutputText() != "" || !resp.JSON.Output.Valid() {
			t.Errorf("turn %d: status %q output %d %q", i, resp.Status, len(resp.Output), resp.OutputText())
		}
	}
}

func TestMalformedArgumentsPassThrough(t *testing.T) {
	const bad = `{"city": "Par` + "\n\t\"ü\\"
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Calls: []fakemodel.Call{
		{Name: "get_weather", Arguments: bad},
		{Name: "noargs", Arguments: ""},
	}})
	defer srv.Close()
	resp, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Output[0].AsFunctionCall().Arguments; got != bad {
		t.Errorf("arguments = %q, want %q", got, bad)
	}
	if got := resp.Output[0].Arguments.OfString; got != bad {
		t.Errorf("union arguments = %q, want %q", got, bad)
	}
	if fc := resp.Output[1].AsFunctionCall(); fc.Arguments != "" || !fc.JSON.Arguments.Valid() {
		t.Errorf("empty arguments: %q valid=%v", fc.Arguments, fc.JSON.Arguments.Valid())
	}
}

func TestTextAndCalls(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "Let me check.", Calls: []fakemodel.Call{{Name: "f", Arguments: "{}"}}})
	defer srv.Close()
	resp, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 2 || resp.Output[0].Type != "message" || resp.Output[1].Type != "function_call" {
		t.Fatalf("output: %s", resp.RawJSON())
	}
	if resp.OutputText() != "Let me check." {
		t.Errorf("OutputText = %q", resp.OutputText())
	}
}

func TestExhaustedScript(t *testing.T) {
	srv := fakemodel.NewOpenAI()
	defer srv.Close()
	resp, err := newClient(srv).Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != fakemodel.ExhaustedText {
		t.Errorf("OutputText = %q", resp.OutputText())
	}
	if r := srv.Requests()[0]; r.Turn != -1 || r.StatusCode != 200 {
		t.Errorf("turn %d status %d", r.Turn, r.StatusCode)
	}
}

func TestRespondDynamic(t *testing.T) {
	var srv *fakemodel.OpenAIServer
	srv = fakemodel.NewOpenAI(
		fakemodel.Turn{Respond: func(req fakemodel.Request) *fakemodel.Turn {
			_ = srv.Requests() // must not deadlock
			return &fakemodel.Turn{Text: "echo: " + req.(fakemodel.OpenAIRequest).Input[0].Text}
		}},
		fakemodel.Turn{Respond: func(req fakemodel.Request) *fakemodel.Turn { return nil }},
	)
	defer srv.Close()
	client := newClient(srv)
	for _, want := range []string{"echo: ping", fakemodel.ExhaustedText} {
		resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("ping")})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OutputText() != want {
			t.Errorf("OutputText = %q, want %q", resp.OutputText(), want)
		}
	}
	srv.Enqueue(fakemodel.Turn{Text: "more"})
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("x")})
	if err != nil || resp.OutputText() != "more" {
		t.Errorf("enqueued turn: %v %q", err, resp.OutputText())
	}
}

func TestRootBaseURL(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "root"})
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("test"))
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "root" || srv.Requests()[0].Path != "/responses" {
		t.Errorf("text %q path %q", resp.OutputText(), srv.Requests()[0].Path)
	}
}

func TestRejectsMissingAPIKeyAndBadPaths(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Text: "unused"})
	defer srv.Close()
	for _, tc := range []struct {
		method, path, auth, body string
		status                   int
	}{
		{"POST", "/v1/responses", "", `{"model":"m"}`, 401},
		{"POST", "/v1/chat/completions", "Bearer k", `{"model":"m"}`, 404},
		{"GET", "/v1/responses", "Bearer k", ``, 405},
		{"POST", "/v1/responses", "Bearer k", `{not json`, 400},
		{"POST", "/v1/responses", "Bearer k", `{"input":"hi"}`, 400},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL()+tc.path, strings.NewReader(tc.body))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != tc.status || err != nil || body.Error.Message == "" || body.Error.Type == "" {
			t.Errorf("%s %s: status %d (want %d), body %+v, err %v", tc.method, tc.path, res.StatusCode, tc.status, body, err)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("rejected requests consumed a turn")
	}
}

func TestStreaming(t *testing.T) {
	srv := fakemodel.NewOpenAI(
		fakemodel.Turn{Status: http.StatusTooManyRequests},
		fakemodel.Turn{Text: "Checking the weather now.", Calls: []fakemodel.Call{{Name: "get_weather", Arguments: `{"city":"Paris"}`, CallID: "call_p"}}},
	)
	defer srv.Close()
	stream := newClient(srv).Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
	defer stream.Close()

	var types []string
	var text, args strings.Builder
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.function_call_arguments.delta":
			args.WriteString(ev.AsResponseFunctionCallArgumentsDelta().Delta)
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types: %v", types)
	}
	for _, want := range []string{"response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.done", "response.content_part.done", "response.function_call_arguments.done", "response.output_item.done"} {
		found := false
		for _, ty := range types {
			found = found || ty == want
		}
		if !found {
			t.Errorf("missing event %s in %v", want, types)
		}
	}
	if text.String() != "Checking the weather now." || args.String() != `{"city":"Paris"}` {
		t.Errorf("deltas: text %q args %q", text.String(), args.String())
	}
	if final.Status != "completed" || final.OutputText() != "Checking the weather now." || len(final.Output) != 2 {
		t.Fatalf("final: %s", final.RawJSON())
	}
	if fc := final.Output[1].AsFunctionCall(); fc.CallID != "call_p" || fc.Arguments != `{"city":"Paris"}` {
		t.Errorf("final call: %+v", fc)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[1].Stream || reqs[1].ResponseID != final.ID {
		t.Errorf("requests: %d, stream %v", len(reqs), len(reqs) > 1 && reqs[1].Stream)
	}
}

func TestConcurrentRequests(t *testing.T) {
	const n = 8
	turns := make([]fakemodel.Turn, n)
	for i := range turns {
		turns[i] = fakemodel.Turn{Text: fmt.Sprint(i)}
	}
	srv := fakemodel.NewOpenAI(turns...)
	defer srv.Close()
	client := newClient(srv)
	var wg sync.WaitGroup
	seen := make(chan string, n)
	for range n {
		wg.Go(func() {
			resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "m", Input: userInput("hi")})
			if err != nil {
				t.Error(err)
				return
			}
			seen <- resp.OutputText()
		})
	}
	wg.Wait()
	close(seen)
	got := map[string]bool{}
	for s := range seen {
		got[s] = true
	}
	if len(got) != n || srv.Remaining() != 0 || len(srv.Requests()) != n {
		t.Errorf("got %v, remaining %d", got, srv.Remaining())
	}
}

// A stateless request may send back a reasoning item only with the
// encrypted_content the server gave that item in the response: the
// provisional one of a stream's output_item.added, or another item's, is
// refused, without consuming a turn.
func TestReasoningSealChecked(t *testing.T) {
	srv := fakemodel.NewOpenAI(fakemodel.Turn{Reasoning: "r", Summary: "s", Text: "a"}, fakemodel.Turn{Text: "b"})
	defer srv.Close()
	client := newClient(srv)
	params := responses.ResponseNewParams{Model: openai.ChatModelGPT4o, Input: userInput("hi"), Store: openai.Bool(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}}
	s := client.Responses.NewStreaming(ctx(t), params)
	var added, done string
	for s.Next() {
		ev := s.Current()
		if ev.Item.Type != "reasoning" {
			continue
		}
		switch ev.Type {
		case "response.output_item.added":
			added = ev.Item.RawJSON()
		case "response.output_item.done":
			done = ev.Item.RawJSON()
		}
	}
	if err := s.Err(); err != nil || added == "" || done == "" {
		t.Fatalf("stream: %v, added %s, done %s", err, added, done)
	}
	send := func(item string) error {
		_, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: openai.ChatModelGPT4o, Store: openai.Bool(false),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
				param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(item))}}})
		return err
	}
	if err := send(added); err == nil || apiError(t, err).StatusCode != 400 {
		t.Errorf("the provisional encrypted_content was accepted back: %v", err)
	}
	if err := send(done); err != nil {
		t.Errorf("the item as the response gave it was refused: %v", err)
	}
	if srv.Remaining() != 0 {
		t.Errorf("%d turns left", srv.Remaining())
	}
}
