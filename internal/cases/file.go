// Package cases loads and runs tool-call conformance case files
// (schema_version "tool-cases-v2", the user's suite in
// testdata/tool-cases-v2.json). Each case runs in a fresh world (an empty
// store, a fresh order service, the case's principal, a clock set to each
// step's now), and each step is driven through the whole path a real call
// takes: the provider's wire tool call (a Responses function_call by
// default; World.Adapter picks Chat Completions or Anthropic Messages)
// decoded by that provider's adapter, the guard, the store, and back out as
// the provider's tool result.
package cases

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/toolguard/toolguard/internal/orders"
)

// SchemaVersion is the case file format this package reads.
const SchemaVersion = "tool-cases-v2"

// File is a case file.
type File struct {
	SchemaVersion string `json:"schema_version"`
	Contract      struct {
		ModelResult    string `json:"model_result"`
		ProtectedAudit string `json:"protected_audit"`
	} `json:"contract"`
	Cases []Case `json:"cases"`
}

// Case is one scenario: a principal and its steps.
type Case struct {
	ID        string        `json:"id"`
	Principal CasePrincipal `json:"principal"`
	Steps     []Step        `json:"steps"`
}

// CasePrincipal is a case's principal, as the case file writes it.
type CasePrincipal struct {
	TenantID  string   `json:"tenant_id"`
	SubjectID string   `json:"subject_id"`
	Roles     []string `json:"roles"`
}

// Step is one dispatch or status query and what it must produce.
type Step struct {
	StepID           string       `json:"step_id"`
	Action           string       `json:"action"`
	Proposal         StepProposal `json:"proposal"`
	ExecutionContext StepContext  `json:"execution_context"`
	Approval         string       `json:"approval"`
	Now              *float64     `json:"now"`
	Failure          string       `json:"failure"`
	StatusRefFrom    *string      `json:"status_ref_from"`
	// Expected maps a member of the model result (code, status, outcome,
	// recovery, delivery, data, message, …) to its expected JSON value,
	// plus side_effect_count, the order service's drafts so far.
	Expected map[string]json.RawMessage `json:"expected"`
}

// StepProposal is a step's proposal; Arguments is the JSON value the model
// sent, which the runner hands the adapter as the arguments string.
//
// Name may be the empty string: the contract reads it as a tool that does
// not exist (UNKNOWN_TOOL), so a case file may carry it. Only an absent or
// null name is malformed.
type StepProposal struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`

	hasName bool // "name" was present and a string, possibly empty
}

// UnmarshalJSON decodes a proposal, strictly (unknown members are an
// error, as everywhere in a case file), and records whether "name" was
// given, so that an empty name can be told from a missing one.
func (p *StepProposal) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*p = StepProposal{Arguments: raw.Arguments, hasName: raw.Name != nil}
	if raw.Name != nil {
		p.Name = *raw.Name
	}
	return nil
}

// StepContext is a step's execution context. As the contract's
// section 1 allows, any id may be the empty string or null: both mean "no
// such id" (no call id, no operation id, no idempotency key), and the
// runner passes the call on without it.
type StepContext struct {
	Provider        string  `json:"provider"`
	APIFamily       string  `json:"api_family"`
	ResponseID      string  `json:"response_id"`
	CallID          string  `json:"call_id"`
	OperationID     string  `json:"operation_id"`
	IdempotencyKey  *string `json:"idempotency_key"`
	AdapterRevision string  `json:"adapter_revision"`
}

// The approvals and actions a step may name.
var (
	Approvals = []string{"none", "valid", "expired", "mismatched"}
	Actions   = []string{"dispatch", "query_status"}
)

// Load reads and checks a case file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// FormatError is a malformed case file: it names the case, step and field.
type FormatError struct {
	Case, Step, Field, Problem string
}

// Error names the case, step and field.
func (e *FormatError) Error() string {
	where := "file"
	if e.Case != "" {
		where = "case " + e.Case
	}
	if e.Step != "" {
		where += " step " + e.Step
	}
	return fmt.Sprintf("malformed case file: %s: field %s: %s", where, e.Field, e.Problem)
}

// Parse decodes and checks a case file.
func Parse(b []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &FormatError{Field: "(json)", Problem: err.Error()}
	}
	if f.SchemaVersion != SchemaVersion {
		return nil, &FormatError{Field: "schema_version", Problem: fmt.Sprintf("%q, want %q", f.SchemaVersion, SchemaVersion)}
	}
	if len(f.Cases) == 0 {
		return nil, &FormatError{Field: "cases", Problem: "no cases"}
	}
	ids := map[string]bool{}
	for i := range f.Cases {
		if err := f.Cases[i].check(); err != nil {
			return nil, err
		}
		if ids[f.Cases[i].ID] {
			return nil, &FormatError{Case: f.Cases[i].ID, Field: "id", Problem: "duplicate case id"}
		}
		ids[f.Cases[i].ID] = true
	}
	return &f, nil
}

func (c *Case) check() error {
	bad := func(step, field, problem string) error {
		return &FormatError{Case: c.ID, Step: step, Field: field, Problem: problem}
	}
	if c.ID == "" {
		return bad("", "id", "missing")
	}
	if c.Principal.TenantID == "" || c.Principal.SubjectID == "" {
		return bad("", "principal", "tenant_id and subject_id are required")
	}
	if len(c.Steps) == 0 {
		return bad("", "steps", "no steps")
	}
	seen := map[string]bool{}
	failures := orders.Failures()
	for _, s := range c.Steps {
		switch {
		case s.StepID == "":
			return bad("", "step_id", "missing")
		case seen[s.StepID]:
			return bad(s.StepID, "step_id", "duplicate")
		case !slices.Contains(Actions, s.Action):
			return bad(s.StepID, "action", fmt.Sprintf("%q, want one of %v", s.Action, Actions))
		case s.Action == "dispatch" && !s.Proposal.hasName:
			return bad(s.StepID, "proposal.name", "missing (an empty string is allowed: an unknown tool)")
		case s.Action == "dispatch" && len(s.Proposal.Arguments) == 0:
			return bad(s.StepID, "proposal.arguments", "missing")
		case !slices.Contains(Approvals, s.Approval):
			return bad(s.StepID, "approval", fmt.Sprintf("%q, want one of %v", s.Approval, Approvals))
		case s.Now == nil:
			return bad(s.StepID, "now", "missing")
		case !slices.Contains(failures, orders.Failure(s.Failure)):
			return bad(s.StepID, "failure", fmt.Sprintf("%q, want one of %v", s.Failure, failures))
		case s.Action == "query_status" && (s.StatusRefFrom == nil || !seen[*s.StatusRefFrom]):
			return bad(s.StepID, "status_ref_from", "must name an earlier step of the case")
		case len(s.Expected) == 0:
			return bad(s.StepID, "expected", "missing")
		}
		if _, ok := s.Expected["code"]; !ok {
			return bad(s.StepID, "expected.code", "missing")
		}
		if v, ok := s.Expected["side_effect_count"]; ok {
			var n int
			if err := json.Unmarshal(v, &n); err != nil {
				return bad(s.StepID, "expected.side_effect_count", "not an integer")
			}
		}
		seen[s.StepID] = true
	}
	return nil
}
