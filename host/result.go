package host

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

// Map returns a model result as the JSON object a framework hands the
// model (a function response, a tool output): the tool-model-result-v2
// object as a map, numbers with their exact digits (json.Number).
func Map(res *guard.Result) map[string]any {
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

// ModelResult reads a framework's tool output back as the model result it
// carries: a map Map made (or the same object after JSON round trips), JSON
// bytes or text. It fails for anything that is not a tool-model-result-v2
// object.
func ModelResult(output any) (*guard.Result, error) {
	if output == nil {
		return nil, errors.New("host: no tool output")
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

// unavailable is the model result of a call the host could not answer
// (a status query the store could not serve): UNAVAILABLE, safe to retry
// later.
func unavailable() *guard.Result {
	return &guard.Result{Code: guard.CodeUnavailable, Delivery: guard.DeliveryFresh, Message: guard.CodeUnavailable.DefaultMessage()}
}

// unknownTool is the model result of a call of a tool the run does not
// have, answered without a dispatch.
func unknownTool() *guard.Result {
	return &guard.Result{Code: guard.CodeUnknownTool, Delivery: guard.DeliveryFresh, Message: guard.CodeUnknownTool.DefaultMessage()}
}
