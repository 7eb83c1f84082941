package tgadk

import (
	"errors"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// Response returns the function response of a model result: the
// tool-model-result-v2 object as a map, the shape ADK gives a model
// (genai.FunctionResponse.Response). Numbers keep their exact digits
// (json.Number). It is host.Map.
func Response(res *guard.Result) map[string]any { return host.Map(res) }

// ModelResult reads a function response back as the model result it
// carries; it fails for a response that is not a tool-model-result-v2
// object (an error of a tool the guard does not run).
func ModelResult(resp map[string]any) (*guard.Result, error) {
	if resp == nil {
		return nil, errors.New("tgadk: no function response")
	}
	return host.ModelResult(resp)
}
