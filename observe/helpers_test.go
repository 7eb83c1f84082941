package observe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// Distinctive strings that must never reach a span, a metric or a log.
const (
	secretTenant  = "tenant-SECRET-7f3a"
	secretSubject = "subject-SECRET-91bc"
	secretValue   = "ARG-SECRET-value-42"
	secretKey     = "ARG-SECRET-key-17"
	secretMember  = "ARG-SECRET-member"
	secretIdemKey = "IDEM-SECRET-key"
	secret        = "SECRET"
)

var principal = guardtest.Principal(secretTenant, secretSubject)

// world is a guardtest world whose guard has the interceptors of opts.
type world struct {
	*guardtest.World
	tools *toolset.Set
}

// newWorld returns a world on miniredis; build makes the guard options
// from the world's tools (for Options.Tools).
func newWorld(t *testing.T, build func(tools guard.Tools) guard.Options) *world {
	t.Helper()
	_, rdb := redistest.Mini(t)
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	tools := w.Down.Tools()
	opts := build(tools)
	opts.Clock = guard.ClockFunc(w.Now)
	opts.Signer = w.Signer
	opts.Lease = guardtest.Lease
	w.Guard = guard.New(tools, s, opts)
	return &world{World: w, tools: tools}
}

// scenario runs the calls every signal is checked on and returns the call
// ids it used. Every argument value, the tenant, the subject and the
// idempotency key hold "SECRET".
func scenario(t *testing.T, w *world) {
	t.Helper()
	p := principal
	getArgs := fmt.Sprintf(`{"key":%q}`, secretKey)
	putArgs := fmt.Sprintf(`{"key":%q,"value":%q}`, secretKey, secretValue)
	otherPut := fmt.Sprintf(`{"key":%q,"value":%q}`, secretKey, secretValue+"-2")

	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "get", Args: getArgs, CallID: "call-read"}), guard.CodeOK, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "get", Args: getArgs, CallID: "call-read"}), guard.CodeOK, guard.DeliveryLocalReplay)
	res := w.Dispatch(t, p, guardtest.Req{Tool: "get", Args: fmt.Sprintf(`{%q:1}`, secretMember), CallID: "call-bad-args"})
	guardtest.Want(t, res, guard.CodeInvalidArguments, guard.DeliveryFresh)
	if !strings.Contains(res.Message, secretMember) {
		t.Fatalf("the schema error does not quote the arguments (%q); the redaction test proves less than it claims", res.Message)
	}
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "no_such_tool", Args: `{}`, CallID: "call-unknown-tool"}), guard.CodeUnknownTool, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: putArgs, CallID: "call-write", Key: secretIdemKey}), guard.CodeOK, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: otherPut, CallID: "call-conflict", Key: secretIdemKey}), guard.CodeIdempotencyConflict, guard.DeliveryFresh)

	// A write whose reply is lost, retried, then settled by status queries.
	w.Down.FailNext(guard.CodeOutcomeUnknown, true)
	first := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: putArgs, CallID: "call-unknown"})
	guardtest.Want(t, first, guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: putArgs, CallID: "call-unknown"}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	guardtest.Want(t, w.Status(t, p, first.OperationID), guard.CodeOK, guard.DeliveryReceiptReconciled)
	guardtest.Want(t, w.Status(t, p, first.OperationID), guard.CodeOK, guard.DeliveryLocalReplay)

	// A host error: no subject.
	if _, err := w.Guard.Dispatch(context.Background(), guard.Call{Principal: guard.Principal{TenantID: secretTenant},
		Proposal: guard.Proposal{Name: "get", Arguments: []byte(getArgs)}}); err == nil {
		t.Fatal("dispatch without a subject: no host error")
	}
}
