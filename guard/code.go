package guard

import "fmt"

// Code is the closed set of result codes of the tool-model-result-v2
// contract. Every dispatch ends in exactly one of them.
type Code uint8

// The result codes. The zero value is not a valid code.
const (
	_                        Code = iota
	CodeOK                        // the call ran and its result is committed
	CodeNotFound                  // the resource does not exist for this principal
	CodeUnknownTool               // no tool of that exact name
	CodeInvalidArguments          // the arguments do not match the tool's schema
	CodeApprovalRequired          // a write that needs approval came without one
	CodeApprovalInvalid           // the approval grant is expired, forged or for another intent
	CodeIdempotencyConflict       // the idempotency key was used for another intent
	CodeCallIDConflict            // the call id was used for another intent
	CodeTimeoutBeforeExecute      // the call failed before its side effect could start
	CodeRateLimit                 // rate limited; retry after RetryAfter
	CodeOutcomeUnknown            // the call started but its outcome was lost
	CodeInProgress                // the same operation is executing right now
	CodeUnavailable               // the idempotency store (or a read's backend) is unreachable; nothing changed
	CodeBudgetExhausted           // the tool's budget for the run, or the tenant's for the period, is spent; nothing ran
	maxCode
)

// Status is the coarse state of a result: succeeded, failed or unknown.
type Status string

// Outcome says whether the side effect happened.
type Outcome string

// Recovery tells the model what it can do next.
type Recovery string

// Delivery tells how the result was produced.
type Delivery string

// The statuses.
const (
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusUnknown   Status = "unknown"
)

// The outcomes.
const (
	OutcomeCommitted  Outcome = "committed"
	OutcomeNotStarted Outcome = "not_started"
	OutcomeUnknown    Outcome = "unknown"
)

// The recoveries.
const (
	RecoveryNone            Recovery = "none"
	RecoveryCorrectInput    Recovery = "correct_input"
	RecoveryRequestApproval Recovery = "request_approval"
	RecoveryHumanReview     Recovery = "human_review"
	RecoveryRetryAfter      Recovery = "retry_after"
	RecoveryQueryStatus     Recovery = "query_status"
)

// The deliveries.
const (
	// DeliveryFresh: computed by this dispatch.
	DeliveryFresh Delivery = "fresh"
	// DeliveryLocalReplay: a stored terminal result returned again.
	DeliveryLocalReplay Delivery = "local_replay"
	// DeliveryReceiptReconciled: an unknown outcome settled by the
	// downstream system's receipt.
	DeliveryReceiptReconciled Delivery = "receipt_reconciled"
)

type codeInfo struct {
	name     string
	status   Status
	outcome  Outcome
	recovery Recovery
	message  string
}

var codeTable = [maxCode]codeInfo{
	CodeOK:                   {"OK", StatusSucceeded, OutcomeCommitted, RecoveryNone, ""},
	CodeNotFound:             {"NOT_FOUND", StatusFailed, OutcomeNotStarted, RecoveryNone, "No such resource."},
	CodeUnknownTool:          {"UNKNOWN_TOOL", StatusFailed, OutcomeNotStarted, RecoveryCorrectInput, "No tool has that name."},
	CodeInvalidArguments:     {"INVALID_ARGUMENTS", StatusFailed, OutcomeNotStarted, RecoveryCorrectInput, "The arguments do not match the tool's schema."},
	CodeApprovalRequired:     {"APPROVAL_REQUIRED", StatusFailed, OutcomeNotStarted, RecoveryRequestApproval, "This action needs a human's approval first."},
	CodeApprovalInvalid:      {"APPROVAL_INVALID", StatusFailed, OutcomeNotStarted, RecoveryRequestApproval, "The approval is expired or does not match this action."},
	CodeIdempotencyConflict:  {"IDEMPOTENCY_CONFLICT", StatusFailed, OutcomeNotStarted, RecoveryHumanReview, "This idempotency key was already used for a different action."},
	CodeCallIDConflict:       {"CALL_ID_CONFLICT", StatusFailed, OutcomeNotStarted, RecoveryHumanReview, "This call id was already used for a different action."},
	CodeTimeoutBeforeExecute: {"TIMEOUT_BEFORE_EXECUTE", StatusFailed, OutcomeNotStarted, RecoveryRetryAfter, "The call timed out before it started; nothing changed."},
	CodeRateLimit:            {"RATE_LIMIT", StatusFailed, OutcomeNotStarted, RecoveryRetryAfter, "Rate limited; nothing changed."},
	CodeOutcomeUnknown:       {"OUTCOME_UNKNOWN", StatusUnknown, OutcomeUnknown, RecoveryQueryStatus, "The call started but its outcome is unknown; query its status before doing anything else."},
	CodeInProgress:           {"IN_PROGRESS", StatusUnknown, OutcomeUnknown, RecoveryRetryAfter, "The same operation is running right now."},
	CodeUnavailable:          {"UNAVAILABLE", StatusFailed, OutcomeNotStarted, RecoveryRetryAfter, "A backing service is unavailable; nothing changed."},
	// BUDGET_EXHAUSTED extends the contract's table (docs/contract.md):
	// no code of SPEC.md says "spent, do not retry".
	CodeBudgetExhausted: {"BUDGET_EXHAUSTED", StatusFailed, OutcomeNotStarted, RecoveryNone, "The budget for this tool is spent; nothing ran. Do not call it again; tell the user."},
}

// Codes lists every valid code in table order.
func Codes() []Code {
	out := make([]Code, 0, maxCode-1)
	for c := CodeOK; c < maxCode; c++ {
		out = append(out, c)
	}
	return out
}

// Valid reports whether c is one of the defined codes.
func (c Code) Valid() bool { return c > 0 && c < maxCode }

// String returns the wire name of the code, e.g. "NOT_FOUND".
func (c Code) String() string {
	if !c.Valid() {
		return fmt.Sprintf("Code(%d)", uint8(c))
	}
	return codeTable[c].name
}

// Status returns the status the contract assigns to c.
func (c Code) Status() Status { return c.info().status }

// Outcome returns the outcome the contract assigns to c.
func (c Code) Outcome() Outcome { return c.info().outcome }

// Recovery returns the recovery the contract assigns to c.
func (c Code) Recovery() Recovery { return c.info().recovery }

// DefaultMessage is the short, safe text sent to the model with c when
// nothing more specific is known.
func (c Code) DefaultMessage() string { return c.info().message }

// Terminal reports whether a result with this code is final for its call id
// and is therefore stored and replayed: OK, NOT_FOUND, UNKNOWN_TOOL,
// INVALID_ARGUMENTS and the two conflicts. Retryable and pending codes are
// never replayed.
func (c Code) Terminal() bool {
	switch c {
	case CodeOK, CodeNotFound, CodeUnknownTool, CodeInvalidArguments, CodeIdempotencyConflict, CodeCallIDConflict:
		return true
	}
	return false
}

func (c Code) info() codeInfo {
	if !c.Valid() {
		return codeInfo{name: c.String(), status: StatusFailed, outcome: OutcomeUnknown, recovery: RecoveryHumanReview}
	}
	return codeTable[c]
}

// ParseCode returns the code with the given wire name.
func ParseCode(name string) (Code, bool) {
	for c := CodeOK; c < maxCode; c++ {
		if codeTable[c].name == name {
			return c, true
		}
	}
	return 0, false
}

// MarshalText implements encoding.TextMarshaler.
func (c Code) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("guard: invalid code %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Code) UnmarshalText(b []byte) error {
	v, ok := ParseCode(string(b))
	if !ok {
		return fmt.Errorf("guard: unknown code %q", b)
	}
	*c = v
	return nil
}
