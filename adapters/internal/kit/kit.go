// Package kit holds what the four provider adapters (adapters/openai,
// chat, anthropic, gemini) share and nothing else uses: the answers to
// calls that do not run, a failed reply, an SDK error with its status,
// arguments filled from a strict schema, a request parameter as a
// conversation item.
package kit

import (
	"encoding/json"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// Failed returns a reply that ended EndFailed because the API reported an
// error: its Reason is the error's code ("error" when the API gave none) and
// its Err the error. rep, when not nil, is what the reply held before the
// error (its id, text so far); it is changed and returned.
func Failed(rep *provider.Reply, err *provider.APIError) *provider.Reply {
	if rep == nil {
		rep = &provider.Reply{}
	}
	if err.Code == "" {
		err.Code = "error"
	}
	rep.End, rep.Reason, rep.Err, rep.Calls = provider.EndFailed, err.Code, err, nil
	return rep
}

// WrapError wraps err as an APIError when status is not 0.
func WrapError(err error, status int) error {
	if err == nil || status == 0 {
		return err
	}
	return &provider.APIError{StatusCode: status, Err: err}
}

// Unknown is the answer to a call that names no tool the loop offers in
// that form: a custom (free-form) tool call, or a namespaced call.
func Unknown(message string) *guard.Result {
	return &guard.Result{Code: guard.CodeUnknownTool, Delivery: guard.DeliveryFresh, Message: message}
}

// Invalid is the answer to a call whose arguments are not complete: the
// provider marked it in progress or incomplete.
func Invalid(message string) *guard.Result {
	return &guard.Result{Code: guard.CodeInvalidArguments, Delivery: guard.DeliveryFresh, Message: message}
}

// Item marshals an SDK request parameter (a message, a tool result) into a
// conversation item. SDK parameters always marshal; one that does not is a
// programming error and panics.
func Item(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("kit: an SDK parameter did not marshal: " + err.Error())
	}
	return b
}

// FillArgs is provider.FillNulls for a call of the tool named name among tools, the
// tools a request offered: the arguments filled from that tool's schema when
// it is strict (a schema that is not strict gives absent its own meaning),
// else as they came.
func FillArgs(tools []toolset.Declared, name string, args []byte) []byte {
	for _, t := range tools {
		if t.Name() == name && t.Schema().Strict() {
			return provider.FillNulls(t.Schema().Map(), args)
		}
	}
	return args
}
