// # Usage
//
// Send the tools as function definitions (strict for toolset.Read and
// Write tools, whose schemas are; see Tool), take the calls of a response
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
// The package example runs this loop against an in-memory fake Responses
// server (package internal/fakemodel); package agentloop is the same loop with
// approvals, pause and resume, and the status tool.
package tgopenai
