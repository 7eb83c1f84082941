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
	Transcript         Transcript        `json:"transcript"`
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
