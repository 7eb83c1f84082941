package cases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// World is what one case runs against. NewWorld returns a fresh one per case.
type World struct {
	Store guard.AuditStore
	// Close releases the world's store, if it needs it.
	Close func()
	// Adapter carries each step through a provider's adapter; nil means
	// Adapters["responses"].
	Adapter Adapter
}

// StepReport is what one step produced.
type StepReport struct {
	StepID string
	Result json.RawMessage // the function_call_output's output
	Audit  []guard.AuditRecord
	// SideEffects is the order service's drafts after the step.
	SideEffects int
	Mismatch    []string // "field want X got Y", empty when the step passed
}

// CaseReport is what one case produced.
type CaseReport struct {
	ID    string
	Steps []StepReport
	Err   error // the case could not run (store failure, bad world)
	// NotCarried, when set, says why the world's adapter cannot carry one
	// of the case's calls (an ErrNotCarried from its Call): the case did
	// not run, and neither passed nor failed.
	NotCarried string
}

// ErrNotCarried is what an Adapter's Call returns (wrapped, saying why)
// for a proposal its provider's wire cannot carry to the guard at all,
// such as arguments that are not a JSON object where the wire holds an
// object: no response of that provider has it, so the case says nothing
// about the adapter.
var ErrNotCarried = errors.New("the adapter's wire cannot carry this call")

// Passed reports whether every step matched.
func (r *CaseReport) Passed() bool {
	if r.Err != nil || r.NotCarried != "" {
		return false
	}
	for _, s := range r.Steps {
		if len(s.Mismatch) > 0 {
			return false
		}
	}
	return true
}

// approvalKey signs the grants a case asks for; the world is throwaway.
var approvalKey = bytes.Repeat([]byte("toolcases-approval-key/"), 2)

// Run runs one case in the world, through the world's provider adapter.
func Run(ctx context.Context, c *Case, w World) *CaseReport {
	return run(ctx, c, w, Direct(w.adapter()))
}

// adapter returns the world's adapter, the Responses one by default.
func (w World) adapter() Adapter {
	if w.Adapter != nil {
		return w.Adapter
	}
	return Adapters["responses"]
}

// Connect connects a case's guard (over the case's tools, for its
// principal) to a host that carries calls to it, such as an agent
// framework's tool-execution path, and returns how each step's call travels
// through that host, and how to disconnect. The host must take the guard
// call's execution context (operation id, idempotency key, call id) and
// approval as they are: they are the case's.
type Connect func(ctx context.Context, g *guard.Guard, tools *toolset.Set, p guard.Principal) (Carry, func(), error)

// Carry takes one step's call (or, for a query_status step, its status
// query) through the host to the guard, and returns the model result, the
// tool-model-result-v2 JSON, as the host hands it to the model. An error is
// a host error: the case fails to run.
type Carry func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (output string, err error)

// RunThrough runs one case in the world with every step carried through
// the host connect connects: the way an integration outside this module
// (an agent framework's) runs the suite through its own tool-execution
// path. The world's Adapter still encodes each step's call.
func RunThrough(ctx context.Context, c *Case, w World, connect Connect) *CaseReport {
	return run(ctx, c, w, connect)
}

// Direct drives each step through a provider's adapter: the adapter
// decoded the call from the provider's wire item, the guard answers, and
// the result goes back out in the provider's tool-result shape. It is the
// host Run connects; a test of a suite driver uses it as a host that is
// right by construction.
func Direct(a Adapter) Connect {
	return func(_ context.Context, g *guard.Guard, _ *toolset.Set, _ guard.Principal) (Carry, func(), error) {
		return func(ctx context.Context, call guard.Call, sc *guard.StatusCall) (string, error) {
			var (
				res *guard.Result
				err error
			)
			if sc != nil {
				res, err = g.QueryStatus(ctx, *sc)
			} else {
				res, err = g.Dispatch(ctx, call)
			}
			if err != nil {
				return "", err
			}
			out, err := a.Output(call.Context.CallID, res)
			return string(out), err
		}, func() {}, nil
	}
}

func run(ctx context.Context, c *Case, w World, connect Connect) *CaseReport {
	rep := &CaseReport{ID: c.ID}
	svc := orders.NewService()
	tools := orders.Tools(svc)
	signer, _ := guard.NewSigner(approvalKey)
	var now atomic.Int64
	clock := guard.ClockFunc(func() time.Time { return time.UnixMicro(now.Load()).UTC() })
	g := guard.New(tools, w.Store, guard.Options{Clock: clock, Signer: signer})
	principal := guard.Principal{TenantID: c.Principal.TenantID, SubjectID: c.Principal.SubjectID, Roles: c.Principal.Roles}
	step, disconnect, err := connect(ctx, g, tools, principal)
	if err != nil {
		rep.Err = fmt.Errorf("connecting the adapter: %w", err)
		return rep
	}
	defer disconnect()

	ops := map[string]string{} // step id -> operation id
	var auditSeq int64
	for _, s := range c.Steps {
		t := time.Unix(0, int64(math.Round(*s.Now*1e6))*1e3)
		now.Store(t.UnixMicro())
		svc.SetFailure(orders.Failure(s.Failure))

		call, err := w.adapter().Call(principal, tools, s.ExecutionContext.ResponseID, s.ExecutionContext.CallID, s.Proposal.Name, compact(s.Proposal.Arguments))
		if errors.Is(err, ErrNotCarried) {
			rep.NotCarried = fmt.Sprintf("step %s: %v", s.StepID, err)
			return rep
		}
		if err != nil {
			rep.Err = fmt.Errorf("step %s: adapter: %w", s.StepID, err)
			return rep
		}
		call.Context.OperationID = s.ExecutionContext.OperationID
		if k := s.ExecutionContext.IdempotencyKey; k != nil {
			call.Context.IdempotencyKey = *k
		}
		call.Approval = approvalToken(signer, s.Approval, principal, call.Proposal, t)

		var sc *guard.StatusCall
		if s.Action == "query_status" {
			sc = &guard.StatusCall{
				Principal:   principal,
				OperationID: ops[*s.StatusRefFrom],
				Tool:        s.Proposal.Name,
				Context:     call.Context,
			}
		}
		output, err := step(ctx, call, sc)
		svc.SetFailure(orders.NoFailure)
		if err != nil {
			rep.Err = fmt.Errorf("step %s: %w", s.StepID, err)
			return rep
		}
		ops[s.StepID] = call.Context.OperationID
		if ops[s.StepID] == "" {
			ops[s.StepID] = call.Context.CallID
		}

		sr := StepReport{StepID: s.StepID, Result: json.RawMessage(output), SideEffects: svc.SideEffects()}
		recs, _, err := w.Store.Audit(ctx, principal.TenantID, auditSeq, 1000)
		if err != nil {
			rep.Err = fmt.Errorf("step %s: reading audit: %w", s.StepID, err)
			return rep
		}
		if len(recs) > 0 {
			auditSeq = recs[len(recs)-1].Seq
		}
		sr.Audit = recs
		sr.Mismatch = compare(s.Expected, []byte(output), svc.SideEffects())
		if len(recs) != 1 {
			sr.Mismatch = append(sr.Mismatch, fmt.Sprintf("audit_records want 1 got %d", len(recs)))
		}
		rep.Steps = append(rep.Steps, sr)
	}
	if _, err := guard.VerifyAudit(ctx, w.Store, principal.TenantID); err != nil {
		rep.Err = fmt.Errorf("audit chain: %w", err)
	}
	return rep
}

// approvalToken mints the grant a step names: valid, for exactly this
// principal and proposal until after now; expired, the same grant already
// expired at now; mismatched, an unexpired grant for another intent.
func approvalToken(s *guard.Signer, kind string, p guard.Principal, prop guard.Proposal, now time.Time) string {
	var g guard.Grant
	switch kind {
	case "valid":
		g = guard.NewGrant(p, prop, "case-approver", now, 5*time.Minute)
	case "expired":
		g = guard.NewGrant(p, prop, "case-approver", now.Add(-10*time.Minute), 5*time.Minute)
	case "mismatched":
		other := guard.Proposal{Name: prop.Name, Arguments: []byte(`{"another":"intent"}`)}
		g = guard.NewGrant(p, other, "case-approver", now, 5*time.Minute)
	default:
		return ""
	}
	tok, _ := s.Sign(g)
	return tok
}

// compact returns the arguments as the model would send them: the JSON text
// of the case's value, without white space.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// compare checks each expected member against the model result, and
// side_effect_count against the service. Values compare as canonical JSON.
func compare(expected map[string]json.RawMessage, output []byte, sideEffects int) []string {
	var got map[string]json.RawMessage
	if err := json.Unmarshal(output, &got); err != nil {
		return []string{"result is not a JSON object: " + err.Error()}
	}
	fields := make([]string, 0, len(expected))
	for k := range expected {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	var out []string
	for _, k := range fields {
		want := canonical(expected[k])
		var g string
		if k == "side_effect_count" {
			g = fmt.Sprint(sideEffects)
		} else if v, ok := got[k]; ok {
			g = canonical(v)
		} else {
			g = "null"
		}
		if want != g {
			out = append(out, fmt.Sprintf("%s want %s got %s", k, want, g))
		}
	}
	return out
}

func canonical(v json.RawMessage) string {
	c, _, err := canon.Parse(v, canon.Limits{MaxBytes: len(v) + 1})
	if err != nil {
		return string(v)
	}
	return string(c)
}
