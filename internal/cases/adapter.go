package cases

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	tgchat "github.com/toolguard/toolguard/adapters/chat"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// Adapter carries a step through one provider's adapter: the proposal is
// encoded as that provider's wire tool call and decoded by the adapter,
// and the result is mapped into the provider's tool-result shape, from
// which the model result is read back.
type Adapter interface {
	// Call returns the guard call of a proposal (name, and arguments as
	// the model wrote them) carried by response responseID under callID.
	Call(p guard.Principal, tools *toolset.Set, responseID, callID, name, args string) (guard.Call, error)
	// Output returns the model result as the provider's tool result
	// answering callID carries it.
	Output(callID string, res *guard.Result) (json.RawMessage, error)
}

// Adapters are the adapters the runner can use, by name; "responses" is
// the default.
var Adapters = map[string]Adapter{
	"responses": responsesAdapter{},
	"chat":      chatAdapter{},
	"anthropic": anthropicAdapter{},
	"gemini":    geminiAdapter{},
}

// AdapterNames returns the names of Adapters, sorted.
func AdapterNames() []string {
	names := make([]string, 0, len(Adapters))
	for n := range Adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// decode unmarshals a wire JSON object into v as the SDK does.
func decode(wire map[string]any, v any) error {
	b, err := json.Marshal(wire)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// oneCall turns the single call an adapter decoded into the guard call.
func oneCall(p guard.Principal, info provider.Info, responseID string, calls []provider.ToolCall) (guard.Call, error) {
	if len(calls) != 1 || calls[0].Answer != nil {
		return guard.Call{}, fmt.Errorf("the adapter decoded %d calls, want one function call", len(calls))
	}
	c := calls[0]
	return guard.Call{Principal: p, Proposal: guard.Proposal{Name: c.Name, Arguments: []byte(c.Arguments)},
		Context: info.Context(responseID, c.ID)}, nil
}

type responsesAdapter struct{}

func (responsesAdapter) Call(p guard.Principal, tools *toolset.Set, responseID, callID, name, args string) (guard.Call, error) {
	var resp responses.Response
	err := decode(map[string]any{"id": responseID, "object": "response", "status": "completed", "output": []any{
		map[string]any{"type": "function_call", "id": "fc_1", "call_id": callID, "name": name, "arguments": args, "status": "completed"}}}, &resp)
	if err != nil {
		return guard.Call{}, err
	}
	return oneCall(p, tgopenai.NewModel(oai.Client{}, tgopenai.ModelOptions{}).Info(), resp.ID, tgopenai.Calls(&resp, tools.Tools()))
}

func (responsesAdapter) Output(callID string, res *guard.Result) (json.RawMessage, error) {
	_, out, ok := tgopenai.OutputText(tgopenai.Output(provider.ToolCall{ID: callID}, res))
	if !ok {
		return nil, errors.New("adapter produced no function_call_output")
	}
	return json.RawMessage(out), nil
}

type chatAdapter struct{}

func (chatAdapter) Call(p guard.Principal, tools *toolset.Set, responseID, callID, name, args string) (guard.Call, error) {
	var comp oai.ChatCompletion
	err := decode(map[string]any{"id": responseID, "object": "chat.completion", "choices": []any{map[string]any{
		"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": name, "arguments": args}}}}}}}, &comp)
	if err != nil || len(comp.Choices) != 1 {
		return guard.Call{}, fmt.Errorf("chat completion: %v", err)
	}
	info := tgchat.NewModel(oai.Client{}, tgchat.ModelOptions{}).Info()
	return oneCall(p, info, comp.ID, tgchat.Calls(comp.Choices[0].Message, tools.Tools()))
}

func (chatAdapter) Output(callID string, res *guard.Result) (json.RawMessage, error) {
	id, out, ok := tgchat.OutputText(tgchat.Output(provider.ToolCall{ID: callID}, res))
	if !ok || id != callID {
		return nil, errors.New("adapter produced no tool message")
	}
	return json.RawMessage(out), nil
}

type anthropicAdapter struct{}

func (anthropicAdapter) Call(p guard.Principal, tools *toolset.Set, responseID, callID, name, args string) (guard.Call, error) {
	var msg sdk.Message
	err := decode(map[string]any{"id": responseID, "type": "message", "role": "assistant", "stop_reason": "tool_use",
		"content": []any{map[string]any{"type": "tool_use", "id": callID, "name": name, "input": json.RawMessage(args)}}}, &msg)
	if err != nil {
		return guard.Call{}, err
	}
	info := tganthropic.NewModel(sdk.Client{}, tganthropic.ModelOptions{}).Info()
	return oneCall(p, info, msg.ID, tganthropic.Calls(&msg, tools.Tools()))
}

func (anthropicAdapter) Output(callID string, res *guard.Result) (json.RawMessage, error) {
	block := tganthropic.Output(provider.ToolCall{ID: callID}, res)
	id, out, ok := tganthropic.OutputText(block)
	if !ok || id != callID {
		return nil, errors.New("adapter produced no tool_result block")
	}
	if isError := block.OfToolResult.IsError.Value; isError != (res.Code != guard.CodeOK) {
		return nil, fmt.Errorf("tool_result is_error %v for code %s", isError, res.Code)
	}
	return json.RawMessage(out), nil
}

// geminiAdapter encodes a step as a generateContent response with one
// functionCall part: with the step's call id as its id (as Gemini 3 sends
// one), or with none, as Gemini 2.x and Vertex AI send, when the step has
// none; the adapter then derives the id from the response id and position.
type geminiAdapter struct{}

func (geminiAdapter) Call(p guard.Principal, tools *toolset.Set, responseID, callID, name, args string) (guard.Call, error) {
	// functionCall.args is a JSON object the SDK decodes into a map: other
	// JSON cannot arrive, and duplicate members arrive merged (Gemini's
	// servers send neither; a Struct has no duplicates).
	if _, v, err := canon.Parse([]byte(args), canon.Limits{}); err != nil {
		return guard.Call{}, fmt.Errorf("%w: Gemini's functionCall.args cannot hold %s (%v)", ErrNotCarried, args, err)
	} else if _, ok := v.(map[string]any); !ok {
		return guard.Call{}, fmt.Errorf("%w: Gemini's functionCall.args is an object, not %s", ErrNotCarried, args)
	}
	fc := map[string]any{"name": name, "args": json.RawMessage(args)}
	if callID != "" {
		fc["id"] = callID
	}
	var resp genai.GenerateContentResponse
	err := decode(map[string]any{"responseId": responseID, "candidates": []any{map[string]any{"finishReason": "STOP",
		"content": map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": fc}}}}}}, &resp)
	if err != nil {
		// Arguments that are not a JSON object do not fit a functionCall:
		// Gemini sends none such; the guard sees what the adapter would.
		return guard.Call{}, fmt.Errorf("gemini response: %v", err)
	}
	return oneCall(p, tggemini.NewModel(nil, tggemini.ModelOptions{}).Info(), resp.ResponseID, tggemini.Calls(&resp, tools.Tools()))
}

func (geminiAdapter) Output(callID string, res *guard.Result) (json.RawMessage, error) {
	_, out, ok := tggemini.OutputText(tggemini.Output(provider.ToolCall{ID: callID, Name: "tool"}, res))
	if !ok {
		return nil, errors.New("adapter produced no functionResponse part")
	}
	return json.RawMessage(out), nil
}
