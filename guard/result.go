package guard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolguard/toolguard/internal/canon"
)

// ResultContract is the contract name every model result carries.
const ResultContract = "tool-model-result-v2"

// Result is what the model sees for one dispatch or status query: the
// tool-model-result-v2 object. Status, outcome and recovery follow from Code.
// It never carries principal ids, internal error text or audit data.
type Result struct {
	Code     Code
	Delivery Delivery
	// Data is the tool's output as JSON; nil for every code but OK.
	Data json.RawMessage
	// Message is short text safe to show the model.
	Message string
	// RetryAfter is set with recovery retry_after when a wait is known.
	RetryAfter time.Duration
	// OperationID is set with recovery query_status: the operation the
	// model should ask about.
	OperationID string
}

// Status returns the result's status.
func (r *Result) Status() Status { return r.Code.Status() }

// Outcome returns the result's outcome.
func (r *Result) Outcome() Outcome { return r.Code.Outcome() }

// Recovery returns the result's recovery.
func (r *Result) Recovery() Recovery { return r.Code.Recovery() }

// MarshalJSON writes the tool-model-result-v2 object with its members in a
// fixed order: contract, code, status, outcome, recovery, delivery, data,
// then message, retry_after_ms and operation_id where they apply.
func (r *Result) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 192+len(r.Data)+len(r.Message))), nil
}

// AppendJSON appends the JSON encoding of r to dst.
func (r *Result) AppendJSON(dst []byte) []byte {
	d := r.Delivery
	if d == "" {
		d = DeliveryFresh
	}
	dst = append(dst, `{"contract":"`+ResultContract+`","code":"`...)
	dst = append(dst, r.Code.String()...)
	dst = append(dst, `","status":"`...)
	dst = append(dst, r.Code.Status()...)
	dst = append(dst, `","outcome":"`...)
	dst = append(dst, r.Code.Outcome()...)
	dst = append(dst, `","recovery":"`...)
	dst = append(dst, r.Code.Recovery()...)
	dst = append(dst, `","delivery":"`...)
	dst = append(dst, d...)
	dst = append(dst, `","data":`...)
	if len(r.Data) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, r.Data...)
	}
	if r.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = canon.AppendString(dst, strings.ToValidUTF8(r.Message, "\uFFFD"))
	}
	if r.Code.Recovery() == RecoveryRetryAfter && r.RetryAfter > 0 {
		dst = append(dst, `,"retry_after_ms":`...)
		dst = strconv.AppendInt(dst, r.RetryAfter.Milliseconds(), 10)
	}
	if r.Code.Recovery() == RecoveryQueryStatus && r.OperationID != "" {
		dst = append(dst, `,"operation_id":`...)
		dst = canon.AppendString(dst, strings.ToValidUTF8(r.OperationID, "\uFFFD"))
	}
	return append(dst, '}')
}

// String returns the JSON encoding of r.
func (r *Result) String() string { return string(r.AppendJSON(nil)) }

// wireResult is the decoded form of the JSON object, for UnmarshalJSON.
type wireResult struct {
	Contract     string          `json:"contract"`
	Code         Code            `json:"code"`
	Status       Status          `json:"status"`
	Outcome      Outcome         `json:"outcome"`
	Recovery     Recovery        `json:"recovery"`
	Delivery     Delivery        `json:"delivery"`
	Data         json.RawMessage `json:"data"`
	Message      string          `json:"message,omitempty"`
	RetryAfterMS int64           `json:"retry_after_ms,omitempty"`
	OperationID  string          `json:"operation_id,omitempty"`
}

// UnmarshalJSON reads a tool-model-result-v2 object and checks that its
// status, outcome and recovery agree with its code.
func (r *Result) UnmarshalJSON(b []byte) error {
	var w wireResult
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Contract != ResultContract {
		return fmt.Errorf("guard: result contract %q, want %q", w.Contract, ResultContract)
	}
	if w.Status != w.Code.Status() || w.Outcome != w.Code.Outcome() || w.Recovery != w.Code.Recovery() {
		return fmt.Errorf("guard: result %s has status %q, outcome %q, recovery %q, which the contract does not allow", w.Code, w.Status, w.Outcome, w.Recovery)
	}
	data := w.Data
	if string(data) == "null" {
		data = nil
	}
	*r = Result{Code: w.Code, Delivery: w.Delivery, Data: data, Message: w.Message,
		RetryAfter: time.Duration(w.RetryAfterMS) * time.Millisecond, OperationID: w.OperationID}
	return nil
}
