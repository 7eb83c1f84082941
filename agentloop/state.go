package agentloop

import (
	"encoding/json"
	"fmt"

	"github.com/toolguard/toolguard/guard"
)

// StateVersion names the format of saved run states.
const StateVersion = "agentloop-state-v1"

// State is a paused run, saved as JSON and resumed later, possibly by
// another process with the same store and signer key. It holds no secret:
// grants are checked again by the guard when the run resumes, and the
// principal is the host's at resume time, which must match.
type State struct {
	Version            string            `json:"version"`
	RunID              string            `json:"run_id"`
	TenantID           string            `json:"tenant_id"`
	SubjectID          string            `json:"subject_id"`
	Turn               int               `json:"turn"`
	PreviousResponseID string            `json:"previous_response_id"`
	Calls              []CallState       `json:"calls"`
	Pending            []ApprovalRequest `json:"pending"`
	// Unknown lists the run's writes whose outcome was unknown, so that
	// the status tool can name their tool and key: if the store lost the
	// record, the tool's receipt is asked before the answer is NOT_FOUND.
	Unknown    []UnknownOperation `json:"unknown,omitempty"`
	Transcript Transcript         `json:"transcript"`
}

// UnknownOperation is a write of the run whose outcome was unknown.
type UnknownOperation struct {
	OperationID    string `json:"operation_id"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// unknown returns the run's unknown operation with the id, if any.
func (s *State) unknown(operationID string) (UnknownOperation, bool) {
	for _, u := range s.Unknown {
		if u.OperationID == operationID {
			return u, true
		}
	}
	return UnknownOperation{}, false
}

// CallState is one function call of the paused turn: answered (Output set)
// or waiting for approval.
type CallState struct {
	CallID     string `json:"call_id"`
	Name       string `json:"name"`
	Arguments  string `json:"arguments"`
	ResponseID string `json:"response_id"`
	Output     string `json:"output,omitempty"`
}

// Marshal returns the state as JSON.
func (s *State) Marshal() ([]byte, error) { return json.Marshal(s) }

// LoadState reads a state saved with Marshal.
func LoadState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("agentloop: state: %w", err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("agentloop: state version %q, want %q", s.Version, StateVersion)
	}
	return &s, nil
}

func (s *State) owner(p guard.Principal) bool {
	return s.TenantID == p.TenantID && s.SubjectID == p.SubjectID
}
