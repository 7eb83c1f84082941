package tgmcp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolguard/toolguard/guard"
)

// operation is what a write runs as in the guard: its operation id and
// its idempotency key ("" when the operation id names it alone).
type operation struct{ OperationID, IdempotencyKey string }

// opOf returns the operation the guard runs call as, made explicit: the
// operation id the guard derives (the host's, the scope's or the call
// id), and the idempotency key the client sent or the scope gave.
func (s *Server) opOf(call guard.Call) operation {
	ec := call.Context
	op := operation{OperationID: s.g.OperationID(call), IdempotencyKey: ec.IdempotencyKey}
	if ec.IdempotencyKey == "" && ec.OperationID == "" && op.OperationID != ec.CallID {
		// The scope named both (guard.ScopeIDs): the same id.
		op.IdempotencyKey = op.OperationID
	}
	return op
}

// bindOperation makes an answered call run as the operation its question
// names, and reports false when the call names another one. A call whose
// client named nothing (the re-issued call of a stateless client, whose
// call id is derived from its new request) takes the question's
// operation. A call that names one must name the question's: the same
// idempotency key, the same operation id, or a call id or scope of the
// client's (named) from which the guard derives the same operation.
func (s *Server) bindOperation(q *question, call *guard.Call, named bool) bool {
	ec := &call.Context
	var same bool
	switch {
	case ec.IdempotencyKey != "":
		same = ec.IdempotencyKey == q.IdempotencyKey && (ec.OperationID == "" || ec.OperationID == q.OperationID)
	case ec.OperationID != "":
		same = ec.OperationID == q.OperationID
	case named:
		same = s.g.OperationID(*call) == q.OperationID
	default:
		same = true
	}
	if same {
		ec.OperationID, ec.IdempotencyKey = q.OperationID, q.IdempotencyKey
	}
	return same
}

// metaRequestKey carries a tools/call request's idempotencyKey parameter
// (SEP-3182: params.idempotencyKey, which go-sdk's types do not hold) into
// _meta, where the transports this package wraps stamp it; a client's own
// value under this name is always replaced or removed.
const metaRequestKey = "toolguard/request_idempotency_key"

// idempotencyCapability is the capability a server that honours
// tools/call's idempotencyKey advertises under "tools" (SEP-3182):
// capabilities.tools.idempotency = {}.
const idempotencyCapability = "idempotency"

// The data.type of the JSON-RPC errors of SEP-3182 (request idempotency).
const (
	// keyInProgress: a call with the same idempotencyKey is running now;
	// send the call again later.
	keyInProgress = "idempotency_key_in_progress"
	// keyConflict: the idempotencyKey was used for another tool or other
	// arguments; the call did not run.
	keyConflict = "idempotency_key_conflict"
)

// The JSON-RPC error codes of those errors. SEP-3182 defines none: a
// conflict is invalid params (the key does not fit these params), a call
// in progress an invalid request for now.
const (
	codeKeyConflict   = jsonrpc.CodeInvalidParams
	codeKeyInProgress = jsonrpc.CodeInvalidRequest
)

// keyError answers a result of a call that sent idempotencyKey as SEP-3182
// has it: IN_PROGRESS and IDEMPOTENCY_CONFLICT become JSON-RPC errors whose
// data names the failure and the key; every other result, a replay of an
// earlier one included, is the tool result. It returns nil for those.
func keyError(res *guard.Result, key string) error {
	var typ, msg string
	var code int64
	switch res.Code {
	case guard.CodeInProgress:
		typ, code, msg = keyInProgress, codeKeyInProgress, "a call with this idempotencyKey is running now; send it again later"
	case guard.CodeIdempotencyConflict:
		typ, code, msg = keyConflict, codeKeyConflict, "this idempotencyKey was used for another tool or other arguments; the call did not run"
	default:
		return nil
	}
	data, _ := json.Marshal(map[string]string{"type": typ, "idempotencyKey": key})
	return &jsonrpc.Error{Code: code, Message: msg, Data: data}
}

// advertise adds tools.idempotency to the result of initialize or
// server/discover.
func advertise(res sdk.Result) sdk.Result {
	switch r := res.(type) {
	case *sdk.InitializeResult:
		return &initializeResult{r}
	case *sdk.DiscoverResult:
		return &discoverResult{r}
	}
	return res
}

// initializeResult and discoverResult are go-sdk's results (every method
// of theirs promoted, so the SDK treats them as its own) that marshal with
// capabilities.tools.idempotency.
type (
	initializeResult struct{ *sdk.InitializeResult }
	discoverResult   struct{ *sdk.DiscoverResult }
)

// MarshalJSON implements json.Marshaler.
func (r *initializeResult) MarshalJSON() ([]byte, error) { return withIdempotency(r.InitializeResult) }

// MarshalJSON implements json.Marshaler.
func (r *discoverResult) MarshalJSON() ([]byte, error) { return withIdempotency(r.DiscoverResult) }

// withIdempotency marshals v, a result with capabilities, with
// capabilities.tools.idempotency = {}.
func withIdempotency(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(top["capabilities"], &caps); err != nil || caps == nil {
		return b, nil
	}
	tools := map[string]json.RawMessage{}
	if raw, ok := caps["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil || tools == nil {
			return b, nil
		}
	}
	tools[idempotencyCapability] = json.RawMessage("{}")
	caps["tools"], _ = json.Marshal(tools)
	top["capabilities"], _ = json.Marshal(caps)
	return json.Marshal(top)
}
