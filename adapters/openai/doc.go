// # Usage
//
// Send the tools as function definitions (strict for toolset.Read and
// Write tools, whose schemas are; see Tool), dispatch every function
// call of a response through the guard, and answer each with its
// function_call_output item:
//
//	params.Tools = tgopenai.Tools(set)                // set: a *toolset.Set
//	resp, err := client.Responses.New(ctx, params)   // client: the official openai-go client
//	var outputs responses.ResponseInputParam
//	for _, fc := range tgopenai.FunctionCalls(resp) {
//		res, err := g.Dispatch(ctx, tgopenai.Call(principal, conversationID, resp.ID, fc)) // principal: from the session
//		if err != nil {
//			return err // the host's mistake (a bad principal), never the model's
//		}
//		outputs = append(outputs, tgopenai.Output(fc.CallID, res))
//	}
//	params.PreviousResponseID = oai.String(resp.ID)
//	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
//
// The package example runs this loop against an in-memory fake Responses
// server (package openaitest); package agentloop is the same loop with
// approvals, pause and resume, and the status tool.
package tgopenai
