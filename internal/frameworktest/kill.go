package frameworktest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/internal/fakemodel"
)

// The durable engines' kill tests (integrations/dbos, integrations/temporal)
// play one run: a read, a write that needs a human's yes, a second write,
// then the model's answer of what it was given.

// The kill tests' tools and the call ids of the script's calls (a run's
// tag is added to each).
const (
	ReadTool   = "get_order"
	RefundTool = "create_refund_draft"
	NoteTool   = "add_order_note"
	ReadCall   = "call_read"
	RefundCall = "call_refund"
	NoteCall   = "call_note"
)

// RefundAnswer is the model's answer at the end of every run of
// "refund ORDER-7": each call OK, the draft's and the note's ids (the
// writes' outputs carry them as draft_id and note_id).
const RefundAnswer = "read OK; refund OK DRAFT-ORDER-7; note OK NOTE-ORDER-7"

// RefundScript is the model of the kill tests. It answers by the
// conversation, never by how many requests came before, so that a turn an
// engine asks again after a crash gets the same answer: for "refund REF"
// or "refund REF #tag" (the tag goes into the call ids, unique per run as
// a provider's are), get_order, then create_refund_draft, then
// add_order_note, one call a turn, then a text of the codes and ids the
// tools answered.
func RefundScript(req fakemodel.Request) *fakemodel.Turn {
	outs := map[string]string{}
	for _, o := range req.Results() {
		outs[o.CallID] = o.Output
	}
	ref, tag, _ := strings.Cut(strings.TrimPrefix(UserInput(req), "refund "), " ")
	read, refund, note := ReadCall+tag, RefundCall+tag, NoteCall+tag
	switch {
	case outs[read] == "":
		return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: ReadTool, CallID: read,
			Arguments: fmt.Sprintf(`{"order_ref":%q}`, ref)}}}
	case outs[refund] == "":
		return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: RefundTool, CallID: refund,
			Arguments: fmt.Sprintf(`{"order_ref":%q,"reason":"duplicate"}`, ref)}}}
	case outs[note] == "":
		return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: NoteTool, CallID: note,
			Arguments: fmt.Sprintf(`{"order_ref":%q,"text":"refund drafted"}`, ref)}}}
	}
	return &fakemodel.Turn{Text: fmt.Sprintf("read %s; refund %s %s; note %s %s", CodeOf(outs[read]),
		CodeOf(outs[refund]), Field(outs[refund], "draft_id"), CodeOf(outs[note]), Field(outs[note], "note_id"))}
}

// UserInput is the text of the request's first user message; a request
// to the Responses fake (fakemodel.NewOpenAI) has it, any other none.
func UserInput(req fakemodel.Request) string {
	in, _ := req.(fakemodel.OpenAIRequest)
	for _, it := range in.Input {
		if it.Type == "message" && it.Role == "user" {
			return it.Text
		}
	}
	return ""
}

// CodeOf is a model result's code, "?" when it has none.
func CodeOf(result string) string {
	var r struct {
		Code string `json:"code"`
	}
	if json.Unmarshal([]byte(result), &r) != nil || r.Code == "" {
		return "?"
	}
	return r.Code
}

// Field finds a string member name anywhere in a model result: "-" when
// none, "?" when the result is not JSON.
func Field(result, name string) string {
	var v any
	if json.Unmarshal([]byte(result), &v) != nil {
		return "?"
	}
	var find func(any) string
	find = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x[name].(string); ok {
				return s
			}
			for _, m := range x {
				if s := find(m); s != "" {
					return s
				}
			}
		case []any:
			for _, m := range x {
				if s := find(m); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if s := find(v); s != "" {
		return s
	}
	return "-"
}

// KillPlan reads a kill test's size from the variable runs (def when
// unset) and its seed from seed (a new one when unset), logs the seed,
// and returns the size and a generator of that seed.
func KillPlan(t testing.TB, runs, seed string, def int) (int, *rand.Rand) {
	t.Helper()
	n := def
	if v := os.Getenv(runs); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of runs", runs, v)
		}
	}
	s := rand.Uint64()
	if v := os.Getenv(seed); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want a number", seed, v)
		}
	}
	t.Logf("%d runs; seed %d (%s=%d plays the same kills)", n, s, seed, s)
	return n, rand.New(rand.NewPCG(s, s))
}
