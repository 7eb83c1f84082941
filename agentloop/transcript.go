package agentloop

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolguard/toolguard/guard"
)

// EventKind says what happened in a run.
type EventKind string

// The event kinds of a transcript.
const (
	EventUser              EventKind = "user"               // the run's input
	EventCall              EventKind = "call"               // the model called a tool
	EventResult            EventKind = "result"             // the guard's answer to a call
	EventApprovalRequested EventKind = "approval_requested" // a write waits for a human
	EventApproved          EventKind = "approved"
	EventDenied            EventKind = "denied"
	EventMessage           EventKind = "message" // the model's text
	// EventUnanswered says that a read dispatched while its reply streamed
	// answers no one: the reply did not end normally, or did not carry
	// the call after all. Text says why.
	EventUnanswered EventKind = "unanswered"
	// EventText is a delta of the model's text as it streams; Stream
	// yields it, transcripts and observers do not get it (they get the
	// whole EventMessage).
	EventText EventKind = "text"
	// EventEnd ends a Stream: Text is the run's status, Run its Result.
	EventEnd EventKind = "end"
)

// Event is one line of a run's transcript.
type Event struct {
	Kind      EventKind       `json:"kind"`
	Turn      int             `json:"turn"`
	CallID    string          `json:"call_id,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"` // the tool-model-result-v2 JSON
	Text      string          `json:"text,omitempty"`
	// Run is the run's Result, on EventEnd only.
	Run *RunResult `json:"-"`
}

// String renders the event as one readable transcript line.
func (e Event) String() string {
	switch e.Kind {
	case EventUser:
		return "user:      " + e.Text
	case EventCall:
		return fmt.Sprintf("model:     calls %s %s", e.Tool, e.Arguments)
	case EventResult:
		var r guard.Result
		if err := json.Unmarshal(e.Result, &r); err != nil {
			return "guard:     " + string(e.Result)
		}
		line := fmt.Sprintf("guard:     %s %s (delivery %s, recovery %s)", e.Tool, r.Code, r.Delivery, r.Recovery())
		if len(r.Data) > 0 {
			line += " " + string(r.Data)
		}
		if r.OperationID != "" {
			line += " operation " + r.OperationID
		}
		if r.Code != guard.CodeOK && r.Message != "" {
			line += ": " + r.Message
		}
		return line
	case EventApprovalRequested:
		return fmt.Sprintf("approval:  %s %s needs a human's yes", e.Tool, e.Arguments)
	case EventApproved:
		return fmt.Sprintf("approval:  %s approved by %s", e.Tool, e.Text)
	case EventDenied:
		return fmt.Sprintf("approval:  %s denied by %s", e.Tool, e.Text)
	case EventMessage:
		return "assistant: " + e.Text
	case EventUnanswered:
		return fmt.Sprintf("model:     %s ran while the reply streamed; its result reaches no one: %s", e.Tool, e.Text)
	case EventText:
		return e.Text
	case EventEnd:
		return "end:       " + e.Text
	}
	return string(e.Kind)
}

// Transcript is the events of a run.
type Transcript []Event

// String renders the transcript, one event a line.
func (t Transcript) String() string {
	var b strings.Builder
	for _, e := range t {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}
