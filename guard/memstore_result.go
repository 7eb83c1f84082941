package guard

import (
	"time"
)

// reply is an answer as the store decided it, before it becomes the
// model's result.
type reply struct {
	code     Code
	delivery Delivery
	data     string
	msg      string
	retryMS  int64
	op       string
}

// result makes the model's result (rule 20): the code's default message
// when none is stored, data only when there is some, a wait only when
// positive, and the operation id only with recovery query_status.
func (r reply) result() *Result {
	res := &Result{Code: r.code, Delivery: r.delivery, Message: r.msg}
	if r.data != "" {
		res.Data = []byte(r.data)
	}
	if res.Message == "" {
		res.Message = r.code.DefaultMessage()
	}
	if r.retryMS > 0 {
		res.RetryAfter = time.Duration(r.retryMS) * time.Millisecond
	}
	if r.code.Recovery() == RecoveryQueryStatus {
		res.OperationID = r.op
	}
	return res
}
