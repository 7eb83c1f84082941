package tggenkit

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

// Output returns the tool output of a model result: the
// tool-model-result-v2 object as a map, the Output of the Genkit tool
// response the model is sent. Numbers keep their exact digits
// (json.Number).
func Output(res *guard.Result) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(res.AppendJSON(nil)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		// AppendJSON writes an object whose data is JSON the guard has
		// parsed; this cannot happen. Say so safely.
		return map[string]any{"contract": guard.ResultContract, "code": guard.CodeUnavailable.String(),
			"status": string(guard.CodeUnavailable.Status()), "outcome": string(guard.CodeUnavailable.Outcome()),
			"recovery": string(guard.CodeUnavailable.Recovery()), "delivery": string(guard.DeliveryFresh), "data": nil}
	}
	return m
}

// ModelResult reads a tool response's Output (ai.ToolResponse.Output: the
// map Output made, or the same object after Genkit's JSON round trips)
// back as the model result it carries; it fails for an output that is not
// a tool-model-result-v2 object.
func ModelResult(output any) (*guard.Result, error) {
	if output == nil {
		return nil, errors.New("tggenkit: no tool output")
	}
	var b []byte
	switch o := output.(type) {
	case json.RawMessage:
		b = o
	case []byte:
		b = o
	case string:
		b = []byte(o)
	default:
		var err error
		if b, err = json.Marshal(output); err != nil {
			return nil, err
		}
	}
	var r guard.Result
	if err := r.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return &r, nil
}
