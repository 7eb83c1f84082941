package toolset

import (
	"context"
	"errors"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
)

// StatusToolName is the status tool's name unless a host names it
// otherwise: the tool the model calls to settle an outcome that was
// unknown (recovery query_status). Package agentloop offers it in every
// run, package adapters/mcp serves it, package observe names its spans.
const StatusToolName = "query_operation_status"

// StatusDescription is the status tool's description, as the model is
// given it.
const StatusDescription = "Ask for the outcome of an earlier operation whose result said recovery query_status " +
	"(outcome unknown). Pass the operation_id from that result, and its tool if known; " +
	"call this before retrying anything whose outcome is unknown."

// StatusInput is the status tool's input: the operation asked about, and
// optionally its tool (null when not known), so that a record the store
// lost can still be settled from the tool's receipt.
type StatusInput struct {
	OperationID string  `json:"operation_id" jsonschema:"description=The operation_id of an earlier result whose recovery was query_status."`
	Tool        *string `json:"tool" jsonschema:"description=The tool of that operation\\, or null if not known."`
}

// Call returns the status query the input asks for, for principal p (the
// host's, never one the model names) and the query's own execution
// context: the operation id through guard.SafeID (an id the guard would
// refuse names no operation it ran, so it is NOT_FOUND, not a host error),
// and the tool when the input names one. Every entry point (agentloop, the
// MCP server, the framework integrations) builds its query with it.
func (in StatusInput) Call(p guard.Principal, ec guard.ExecutionContext) guard.StatusCall {
	sc := guard.StatusCall{Principal: p, OperationID: guard.SafeID(in.OperationID), Context: ec}
	if in.Tool != nil {
		sc.Tool = *in.Tool
	}
	return sc
}

// StatusTool returns the status tool declared under name (StatusToolName
// when name is ""): a read tool whose schema is StatusInput's, strict like
// every toolset tool, the schema its calls are validated against
// (ParseStatus). Its function never runs: the host answers a call with a
// status query for the caller's principal (guard.Guard.QueryStatus).
func StatusTool(name string) *Tool[StatusInput, struct{}] {
	if name == "" {
		name = StatusToolName
	}
	return Read(name, StatusDescription, func(context.Context, *guard.Invocation, StatusInput) (struct{}, error) {
		return struct{}{}, errors.New("toolset: the status tool is answered by a status query, not run")
	}, nil)
}

// statusTool is the declaration ParseStatus validates with.
var statusTool = StatusTool("")

// ParseStatus checks a status tool call's arguments against the status
// tool's schema, the one the model is given, and decodes them. Arguments
// the schema refuses (not JSON, a member missing or of another type, an
// unknown member) are an INVALID_ARGUMENTS result for the model, with what
// is wrong; nothing else is refused (an empty operation id names no
// operation: NOT_FOUND).
func ParseStatus(args []byte) (StatusInput, *guard.Result) {
	canonical, parsed, err := canon.Parse(args, canon.Limits{})
	var in any
	if err == nil {
		in, err = statusTool.Decode(canonical, parsed)
	}
	if err != nil {
		msg := `The status tool takes {"operation_id": "<id from the earlier result>", "tool": "<its tool>" or null}.`
		var ge *guard.Error
		if errors.As(err, &ge) && ge.Message() != "" {
			msg = ge.Message() + " " + msg
		}
		return StatusInput{}, &guard.Result{Code: guard.CodeInvalidArguments, Delivery: guard.DeliveryFresh, Message: msg}
	}
	return in.(StatusInput), nil
}
