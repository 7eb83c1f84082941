// Package tggemini adapts Google's Gemini API and Vertex AI
// (google.golang.org/genai) to the guard: functionCall parts become
// canonical proposals with their execution context, guard results become
// functionResponse parts whose response is the tool-model-result-v2 object,
// and a toolset becomes function declarations whose parametersJsonSchema
// is the very schema the guard validates arguments against. Model is the
// same API as package agentloop's provider, streamed with
// GenerateContentStream.
//
// # Call ids
//
// Only the Gemini API on Gemini 3 models sends call ids; Gemini 2.x and
// Vertex AI send none. A call without one gets an id derived from the
// response id and the call's position among the response's function calls,
// "<responseId>/<position>", so that the same response replayed gives the
// same ids (contract section 1). Model gives a response Gemini sent
// without a responseId (one recorded stream has none) a random one,
// "gemini-<16 hex>": each response received is a distinct response, and
// nothing in it says which; a write the model repeats is still one
// operation in its scope. An id Gemini sent is used and echoed in the
// functionResponse; a derived one is never sent to Gemini.
//
// # Arguments
//
// The SDK hands a call's arguments over decoded (FunctionCall.Args is a
// map): they reach the guard re-encoded with sorted members, and duplicate
// members, which Gemini's servers never send (a Struct has none), cannot
// be seen.
//
// # Endings
//
// STOP (or no finishReason) ends normally. MAX_TOKENS is incomplete.
// SAFETY, RECITATION, PROHIBITED_CONTENT, BLOCKLIST, SPII, IMAGE_SAFETY,
// LANGUAGE and a blocked prompt (no candidates, promptFeedback.blockReason)
// are refused, with that reason. A call in a reply that did not end STOP is
// answered and never executed: UNEXPECTED_TOOL_CALL (a call of a function
// not declared) with UNKNOWN_TOOL, MALFORMED_FUNCTION_CALL and any other
// reason with INVALID_ARGUMENTS. A reply whose UNEXPECTED_TOOL_CALL or
// MALFORMED_FUNCTION_CALL carries calls goes on (the model is told, and
// may call again); one that carries none ends failed with that reason, as
// does any reason not named here.
//
// # Thought signatures
//
// Gemini signs the first function call of a reply (and, on Gemini 3, text
// parts and a trailing empty text part) with a thoughtSignature it needs
// back unchanged. The reply's items keep every part as Gemini sent it,
// signatures, thought parts and empty text parts included; streamed
// argument pieces (Vertex's partialArgs) are assembled into one
// functionCall part that keeps the first piece's signature.
//
// # Absent members
//
// Gemini has no strict mode: for a tool whose schema is strict
// (toolset.Schema.Strict), Calls fills an absent member whose schema allows
// null with null (contract section 3; provider.FillNulls) before the guard
// sees it.
//
// # The adapters' shape
//
// The four adapters (tgopenai, tgchat, tganthropic, tggemini) export the
// same set, with the same signatures but for their API's types: Tools(set)
// the tool definitions to send; Calls(reply, tools) the reply's calls as
// provider.ToolCall; Call(principal, scope, responseID, c) the guard call
// of one; Output(c, result) the item answering it; Outputs(items...) the
// answers as the next request takes them; OutputText(item) an answer's
// call id and tool-model-result-v2 text; Model, ModelOptions, NewModel and
// DefaultModel the provider of package agentloop.
//
// The package is named tggemini, so it needs no alias next to the SDK:
//
//	import "github.com/toolguard/toolguard/adapters/gemini"
package tggemini

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"google.golang.org/genai"

	"github.com/toolguard/toolguard/adapters/internal/kit"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// The execution-context values this adapter writes.
const (
	providerName = "gemini"
	apiFamily    = "generate_content"
	revision     = "gemini-generate-content-v1"
)

// kindDerived is the provider.ToolCall.Kind of a call whose id the adapter
// derived (Gemini sent none): its functionResponse carries no id.
const kindDerived = "derived-id"

var info = provider.Info{Provider: providerName, APIFamily: apiFamily, Revision: revision}

// newResponseID is the id Model gives a response Gemini sent without one:
// each response received is a distinct response, and nothing in it says
// which, so the id is random ("gemini-" and 16 hex digits).
func newResponseID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "gemini-" + hex.EncodeToString(b[:])
}

// functionCalls returns the function calls of the first candidate, in order.
func functionCalls(resp *genai.GenerateContentResponse) []*genai.FunctionCall {
	var out []*genai.FunctionCall
	for _, p := range parts(resp) {
		if p.FunctionCall != nil {
			out = append(out, p.FunctionCall)
		}
	}
	return out
}

// parts returns the parts of the first candidate's content.
func parts(resp *genai.GenerateContentResponse) []*genai.Part {
	if resp == nil || len(resp.Candidates) == 0 || resp.Candidates[0] == nil || resp.Candidates[0].Content == nil {
		return nil
	}
	return resp.Candidates[0].Content.Parts
}

// argumentsOf returns a function call's arguments as JSON ("{}" for none).
func argumentsOf(fc *genai.FunctionCall) []byte {
	if len(fc.Args) == 0 {
		return []byte("{}")
	}
	b, err := json.Marshal(fc.Args)
	if err != nil {
		// Args came from JSON; it marshals. What does not is answered
		// INVALID_ARGUMENTS by the guard.
		return []byte("null")
	}
	return b
}

// Calls returns the function calls of a response in order, as package
// agentloop runs them: each with its id (the one Gemini sent, else
// "<responseId>/<position>" with Kind "derived-id"), its arguments with absent
// nullable members filled with null when the tool of that name among tools
// (the tools the request offered) has a strict schema, and, when the reply
// did not end STOP, the answer it gets without being run.
func Calls(resp *genai.GenerateContentResponse, tools []toolset.Declared) []provider.ToolCall {
	fcs := functionCalls(resp)
	answer := callAnswer(finishReason(resp))
	responseID := ""
	if resp != nil {
		responseID = resp.ResponseID
	}
	out := make([]provider.ToolCall, 0, len(fcs))
	for i, fc := range fcs {
		c := toolCall(responseID, i, fc, tools)
		c.Answer = answer
		out = append(out, c)
	}
	return out
}

// toolCall is the call at position of the response with responseID.
func toolCall(responseID string, position int, fc *genai.FunctionCall, tools []toolset.Declared) provider.ToolCall {
	c := provider.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: string(kit.FillArgs(tools, fc.Name, argumentsOf(fc)))}
	if c.ID == "" && responseID != "" {
		c.ID, c.Kind = responseID+"/"+strconv.Itoa(position), kindDerived
	}
	return c
}

// callAnswer is the answer a call gets, unrun, in a reply that ended for
// reason; nil for a reply that ended normally.
func callAnswer(reason genai.FinishReason) *guard.Result {
	switch reason {
	case "", genai.FinishReasonStop, genai.FinishReasonUnspecified:
		return nil
	case genai.FinishReasonUnexpectedToolCall:
		return kit.Unknown("This function is not declared; call only the functions offered.")
	case genai.FinishReasonMalformedFunctionCall:
		return kit.Invalid("The function call was malformed; nothing ran. Call again with arguments that match the schema.")
	default:
		return kit.Invalid("The reply ended (" + string(reason) + ") before this call was complete; nothing ran.")
	}
}

// finishReason is the first candidate's finishReason, "" for none.
func finishReason(resp *genai.GenerateContentResponse) genai.FinishReason {
	if resp == nil || len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		return ""
	}
	return resp.Candidates[0].FinishReason
}

// Call returns the guard call of c, a call Calls returned from the
// response with responseID, for the principal, which comes from the host,
// never from the model, in a scope the host names
// (guard.ExecutionContext.Scope): a write the model repeats in the scope is
// the same operation and replays. "" names no scope.
func Call(p guard.Principal, scope, responseID string, c provider.ToolCall) guard.Call {
	return info.Call(p, scope, responseID, c)
}

// Output returns the functionResponse part answering c: its response is
// the tool-model-result-v2 object, its name the call's, its id the call's
// when Gemini sent one (none for an id the adapter derived).
func Output(c provider.ToolCall, res *guard.Result) *genai.Part {
	id := c.ID
	if c.Kind == kindDerived {
		id = ""
	}
	return outputPart(id, c.Name, res.String())
}

func outputPart(id, name, result string) *genai.Part {
	var response map[string]any
	if err := json.Unmarshal([]byte(result), &response); err != nil {
		response = map[string]any{"output": result}
	}
	return &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: id, Name: name, Response: response}}
}

// Outputs returns the one user content that answers every function call of
// a reply, in order: the parts Output made.
func Outputs(parts ...*genai.Part) *genai.Content {
	return &genai.Content{Role: genai.RoleUser, Parts: parts}
}

// OutputText returns the id ("" for none) and tool-model-result-v2 JSON
// of a part made by Output (its name is the part's
// FunctionResponse.Name), and false for any other part.
func OutputText(p *genai.Part) (callID, text string, ok bool) {
	if p == nil || p.FunctionResponse == nil {
		return "", "", false
	}
	b, err := json.Marshal(p.FunctionResponse.Response)
	if err != nil {
		return "", "", false
	}
	return p.FunctionResponse.ID, string(b), true
}

// Tools returns the function declarations of every tool in the set, as one
// genai.Tool.
func Tools(set *toolset.Set) []*genai.Tool { return toolParams(set.Tools()) }

// toolParam returns the declaration of one tool: its parametersJsonSchema is the
// schema the guard validates arguments against.
func toolParam(t toolset.Declared) *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: t.Name(), Description: t.Description(), ParametersJsonSchema: t.Schema().Map()}
}

func toolParams(tools []toolset.Declared) []*genai.Tool {
	if len(tools) == 0 {
		return nil
	}
	decls := make([]*genai.FunctionDeclaration, 0, len(tools))
	for _, t := range tools {
		decls = append(decls, toolParam(t))
	}
	return []*genai.Tool{{FunctionDeclarations: decls}}
}
