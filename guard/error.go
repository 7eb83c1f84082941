package guard

import (
	"errors"
	"fmt"
	"time"
)

// Error is an error that carries a result code. Tools return it (through the
// constructors below) to report how they failed; the guard turns it into the
// model result. Its Message, if set, is shown to the model, so it must be
// safe: no ids, no internals. The wrapped cause is kept for the host's logs
// and never shown.
type Error struct {
	code       Code
	message    string
	retryAfter time.Duration
	cause      error
}

// NewError returns an error with the given code and model-safe message.
func NewError(code Code, message string) *Error {
	return &Error{code: code, message: message}
}

// Code returns the error's result code.
func (e *Error) Code() Code { return e.code }

// Message returns the model-safe message, or "" for the code's default.
func (e *Error) Message() string { return e.message }

// RetryAfter returns how long to wait before retrying, if known.
func (e *Error) RetryAfter() time.Duration { return e.retryAfter }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.cause }

// Error returns the code, the message and the cause, for the host's logs.
func (e *Error) Error() string {
	msg := e.message
	if msg == "" {
		msg = e.code.DefaultMessage()
	}
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.code, msg, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.code, msg)
}

// CodeOf returns the code of the first *Error in err's chain, and false if
// there is none.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.code, true
	}
	return 0, false
}

// ErrNotFound reports that a resource does not exist for this principal, or
// that the principal may not see it: the two are told apart to nobody.
var ErrNotFound = NewError(CodeNotFound, "")

// NotStarted reports that a call failed before its side effect could start:
// a deadline passed before the request was sent, a connection was refused.
// Nothing is stored and a retry may execute.
func NotStarted(cause error) error {
	return &Error{code: CodeTimeoutBeforeExecute, cause: cause}
}

// RateLimited reports that the downstream system refused the call for rate;
// nothing changed. retryAfter may be zero when unknown.
func RateLimited(retryAfter time.Duration, cause error) error {
	return &Error{code: CodeRateLimit, retryAfter: retryAfter, cause: cause}
}

// Unknown reports that the call was sent but its answer was lost: the side
// effect may or may not have happened. The guard records the outcome as
// unknown and never executes the write blind again.
func UnknownOutcome(cause error) error {
	return &Error{code: CodeOutcomeUnknown, cause: cause}
}

// classify maps what a tool returned to a code. Typed errors keep their
// code. Anything else (a plain error, a panic, a context error because the
// caller gave up) is an error the guard cannot see into: for a write the side
// effect may have happened, so the outcome is unknown; a read has no side
// effect, so it is reported unavailable and may be retried.
func classify(err error, effect Effect) Code {
	var e *Error
	if errors.As(err, &e) && e.code.Valid() {
		switch e.code {
		case CodeOutcomeUnknown:
			if effect == Write {
				return e.code
			}
		case CodeTimeoutBeforeExecute, CodeRateLimit, CodeNotFound, CodeInvalidArguments, CodeUnavailable:
			return e.code
		}
		// Codes that only the guard itself may decide (conflicts,
		// approvals, unknown tool, in progress) are not the tool's to
		// claim: treat them as opaque failures.
	}
	if effect == Write {
		return CodeOutcomeUnknown
	}
	return CodeUnavailable
}
