// # Usage
//
// Send the tools as function definitions (strict for toolset.Read and
// Write tools, whose schemas are), take the calls of a response
// with Calls, dispatch each through the guard unless Calls already
// answered it (a function call the provider marked incomplete, a custom
// tool call: neither runs), and answer every call, so that none is
// dropped:
//
//	params.Tools = tgopenai.Tools(set)                // set: a *toolset.Set
//	resp, err := client.Responses.New(ctx, params)   // client: the official openai-go client
//	var outputs responses.ResponseInputParam
//	for _, c := range tgopenai.Calls(resp, set.Tools()) {
//		res := c.Answer
//		if res == nil {
//			res, err = g.Dispatch(ctx, tgopenai.Call(principal, conversationID, resp.ID, c)) // principal: from the session
//			if err != nil {
//				return err // the host's mistake (a bad principal), never the model's
//			}
//		}
//		outputs = append(outputs, tgopenai.Output(c, res))
//	}
//	params.PreviousResponseID = oai.String(resp.ID)
//	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
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
// The package example runs this loop against an in-memory fake Responses
// server (package internal/fakemodel); package agentloop is the same loop with
// approvals, pause and resume, and the status tool.
package tgopenai
