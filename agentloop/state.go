package agentloop

import (
	"encoding/json"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// stateVersion names the format of saved run states.
const stateVersion = "agentloop-state-v2"

// State is a paused run, saved as JSON and resumed later, possibly by
// another process with the same store and signer key. It holds no secret:
// grants are checked again by the guard when the run resumes, and the
// principal is the host's at resume time, which must match.
//
// It carries the conversation the provider needs next (Items), so a run
// whose provider keeps nothing (Chat Completions, Anthropic Messages,
// Responses without store) resumes anywhere; a run chained on the
// provider's side carries only the chain id and the items after it.
type State struct {
	Version   string `json:"version"`
	RunID     string `json:"run_id"`
	TenantID  string `json:"tenant_id"`
	SubjectID string `json:"subject_id"`
	Turn      int    `json:"turn"`
	// API is the provider's API family the run was started on: its
	// Items are in that API's wire format.
	API string `json:"api"`
	// Chain is the provider-side conversation the next request continues
	// (Responses' previous_response_id), "" when the loop keeps it.
	Chain string `json:"chain,omitempty"`
	// Items is the conversation to send next, in the provider's wire
	// format: the whole of it, or with Chain what came after.
	Items   []json.RawMessage      `json:"items,omitempty"`
	Calls   []CallState            `json:"calls"`
	Pending []host.ApprovalRequest `json:"pending"`
	// Unknown lists the run's writes whose outcome was unknown, so that
	// the status tool can name their tool and key: if the store lost the
	// record, the tool's receipt is asked before the answer is NOT_FOUND.
	Unknown []unknownOperation `json:"unknown,omitempty"`
	// Denied holds the fingerprints of the intents a human declined in
	// this run: asked again, the model gets the same denial without a
	// human being asked (contract section 4).
	Denied     []string   `json:"denied,omitempty"`
	Transcript Transcript `json:"transcript"`
}

// unknownOperation is a write of the run whose outcome was unknown.
type unknownOperation struct {
	OperationID    string `json:"operation_id"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// unknown returns the run's unknown operation with the id, if any.
func (s *State) unknown(operationID string) (unknownOperation, bool) {
	for _, u := range s.Unknown {
		if u.OperationID == operationID {
			return u, true
		}
	}
	return unknownOperation{}, false
}

// CallState is one tool call of the paused turn: answered (Output set)
// or waiting for approval.
type CallState struct {
	CallID     string `json:"call_id"`
	Name       string `json:"name"`
	Arguments  string `json:"arguments"`
	Kind       string `json:"kind,omitempty"` // the adapter's tag (provider.ToolCall.Kind)
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
	if s.Version != stateVersion {
		return nil, fmt.Errorf("agentloop: state version %q, want %q", s.Version, stateVersion)
	}
	return &s, nil
}

func (s *State) owner(p guard.Principal) bool {
	return s.TenantID == p.TenantID && s.SubjectID == p.SubjectID
}
