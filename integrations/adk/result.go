package tgadk

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

// Response returns the function response of a model result: the
// tool-model-result-v2 object as a map, the shape ADK gives a model
// (genai.FunctionResponse.Response). Numbers keep their exact digits
// (json.Number).
func Response(res *guard.Result) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(res.AppendJSON(nil)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		// AppendJSON writes an object whose data is the tool's JSON,
		// which the guard has parsed; this cannot happen. Say so safely.
		return map[string]any{"contract": guard.ResultContract, "code": guard.CodeUnavailable.String(),
			"status": string(guard.CodeUnavailable.Status()), "outcome": string(guard.CodeUnavailable.Outcome()),
			"recovery": string(guard.CodeUnavailable.Recovery()), "delivery": string(guard.DeliveryFresh), "data": nil}
	}
	return m
}

// ModelResult reads a function response back as the model result it
// carries; it fails for a response that is not a tool-model-result-v2
// object (an error of a tool the guard does not run).
func ModelResult(resp map[string]any) (*guard.Result, error) {
	if resp == nil {
		return nil, errors.New("tgadk: no function response")
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	var r guard.Result
	if err := r.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return &r, nil
}
