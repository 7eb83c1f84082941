package tggenkit

import (
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// Output returns the tool output of a model result: the
// tool-model-result-v2 object as a map, the Output of the Genkit tool
// response the model is sent. Numbers keep their exact digits
// (json.Number). It is host.Map.
func Output(res *guard.Result) map[string]any { return host.Map(res) }

// ModelResult reads a tool response's Output (ai.ToolResponse.Output: the
// map Output made, or the same object after Genkit's JSON round trips)
// back as the model result it carries; it fails for an output that is not
// a tool-model-result-v2 object. It is host.ModelResult.
func ModelResult(output any) (*guard.Result, error) { return host.ModelResult(output) }
