package tgopenai_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolguard/toolguard/adapters/internal/replay"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/provider"
)

// TestRecordedTraffic serves every recorded Responses API exchange, byte
// for byte as the API sent it (JSON or SSE, gzip where it was), to the real
// openai-go client through the adapter's Model: stateless, and, for the
// recordings not made with store false, chained by previous_response_id
// too. It checks each reply's id, calls (ids, names, arguments),
// text and ending against the recording, and each follow-up request
// against the recorded one: its function_call_output items answer the
// recorded call ids in order, and it continues the previous response,
// either by its id or by sending back every output item of it (reasoning
// with its encrypted_content, commentary messages with their phase, the
// calls) as the recorded request did.
func TestRecordedTraffic(t *testing.T) {
	for _, rec := range replay.ForAPI(t, "responses") {
		modes := []string{"stateless"}
		if rec.Mode != "stateless" {
			modes = append([]string{"chained"}, modes...)
		}
		for _, mode := range modes {
			t.Run(rec.Name+"/"+mode, func(t *testing.T) {
				srv := replay.Start(t, rec)
				client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("replay"), option.WithMaxRetries(0))
				m := tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "recorded", Stateless: mode == "stateless"})
				replay.Drive(t, rec, srv, m, replay.Driver{Results: recordedOutputs, Check: checkFollowUp, Usage: recordedUsage})
			})
		}
	}
}

// recordedUsage returns the usage a recorded response reports: the
// response's, or the one of the event that ends a stream.
func recordedUsage(t *testing.T, it replay.Interaction) (in, out int64) {
	payloads, err := it.Payloads()
	if err != nil {
		t.Fatal(err)
	}
	type usage struct {
		In  int64 `json:"input_tokens"`
		Out int64 `json:"output_tokens"`
	}
	for _, p := range payloads {
		var ev struct {
			Type     string `json:"type"`
			Usage    *usage `json:"usage"`
			Response *struct {
				Usage *usage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(p, &ev) != nil {
			continue
		}
		u := ev.Usage
		if ev.Response != nil && strings.HasPrefix(ev.Type, "response.") && ev.Type != "response.created" && ev.Type != "response.in_progress" {
			u = ev.Response.Usage
		}
		if u != nil {
			in, out = u.In, u.Out
		}
	}
	return in, out
}

// inputItems returns a request's input items as objects.
func inputItems(req map[string]any) []map[string]any {
	list, _ := req["input"].([]any)
	var out []map[string]any
	for _, it := range list {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// tailOutputs returns the function_call_output items that end a request's
// input: the answers to the previous response's calls.
func tailOutputs(req map[string]any) []map[string]any {
	items := inputItems(req)
	i := len(items)
	for i > 0 && items[i-1]["type"] == "function_call_output" {
		i--
	}
	return items[i:]
}

func recordedOutputs(req map[string]any) []string {
	var out []string
	for _, it := range tailOutputs(req) {
		if s, ok := it["output"].(string); ok {
			out = append(out, s)
			continue
		}
		b, _ := json.Marshal(it["output"])
		out = append(out, string(b))
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

func checkFollowUp(t *testing.T, i int, sent, recorded map[string]any, prev *provider.Reply) {
	t.Helper()
	outs := tailOutputs(sent)
	if len(outs) != len(prev.Calls) {
		t.Fatalf("request %d: %d function_call_output items, want one per call (%d)", i, len(outs), len(prev.Calls))
	}
	for j, o := range outs {
		if str(o["call_id"]) != prev.Calls[j].ID {
			t.Errorf("request %d: output %d answers %v, want %s", i, j, o["call_id"], prev.Calls[j].ID)
		}
	}
	if recorded != nil {
		want := tailOutputs(recorded)
		if len(want) != len(outs) {
			t.Errorf("request %d: %d outputs, the recorded request has %d", i, len(outs), len(want))
		}
		for j := range min(len(want), len(outs)) {
			if want[j]["output"] != outs[j]["output"] || !sameCall(recorded, str(want[j]["call_id"]), prev.Calls[j]) {
				t.Errorf("request %d: output %d is %v %v, recorded %v %v", i, j, outs[j]["call_id"], outs[j]["output"], want[j]["call_id"], want[j]["output"])
			}
		}
	}
	if prev.Chain != "" {
		if str(sent["previous_response_id"]) != prev.ID {
			t.Errorf("request %d: previous_response_id %v, want %s", i, sent["previous_response_id"], prev.ID)
		}
		return
	}
	if sent["store"] != false {
		t.Errorf("request %d: store %v in a stateless run", i, sent["store"])
	}
	// Stateless: the previous response's output, every item as the API
	// sent it, is in the input, and so is every item the recorded request
	// sent back of it.
	in := inputItems(sent)
	var ins []string
	for _, it := range in {
		b, _ := json.Marshal(it)
		ins = append(ins, string(b))
	}
	for _, raw := range prev.Items {
		found := false
		for _, s := range ins {
			found = found || replay.SameJSON(string(raw), s)
		}
		if !found {
			t.Errorf("request %d: the output item %s was not sent back as it came", i, raw)
		}
	}
	if recorded == nil {
		return
	}
	for _, want := range inputItems(recorded) {
		typ := str(want["type"])
		if typ != "reasoning" && typ != "function_call" && !(typ == "message" && want["role"] == "assistant") {
			continue
		}
		if !hasItem(in, want) {
			t.Errorf("request %d: the recorded %s item %s is not sent back", i, typ, itemKey(want))
		}
	}
}

// sameCall reports whether the recorded output's call id names call c:
// it is c's id, or the recorder named the call by another id of its own
// (pydantic-ai once sent the item id, fc_…, as call_id) and its request
// declares a function_call of that id with c's name and arguments.
func sameCall(recorded map[string]any, id string, c provider.ToolCall) bool {
	if id == c.ID {
		return true
	}
	for _, it := range inputItems(recorded) {
		if it["type"] == "function_call" && str(it["call_id"]) == id {
			return it["name"] == c.Name && replay.SameJSON(str(it["arguments"]), c.Arguments)
		}
	}
	return false
}

// itemKey names an input item by what identifies it.
func itemKey(it map[string]any) string {
	if id := str(it["call_id"]); id != "" && it["type"] == "function_call" {
		return "call " + id
	}
	return fmt.Sprintf("%v %v", it["type"], it["id"])
}

// sameItem reports whether the sent item it is the recorded item want:
// the same key, or, for a call, the recorder's call id being the item id
// (see sameCall).
func sameItem(it, want map[string]any) bool {
	if it["type"] != want["type"] {
		return false
	}
	if itemKey(it) == itemKey(want) {
		return true
	}
	return it["type"] == "function_call" && str(it["id"]) != "" && it["id"] == want["call_id"]
}

// hasItem reports whether in holds the recorded item want: the same id (a
// call's call_id, name and arguments), an encrypted_content for reasoning
// that had one, the same phase for a message.
func hasItem(in []map[string]any, want map[string]any) bool {
	for _, it := range in {
		if !sameItem(it, want) {
			continue
		}
		switch want["type"] {
		case "reasoning":
			// The API seals the same reasoning anew in each event that
			// carries it (the recorder sent output_item.done's, the
			// adapter response.completed's: both are the response's own,
			// which checkFollowUp checks): the content must be there.
			if want["encrypted_content"] != nil && str(it["encrypted_content"]) == "" {
				continue
			}
		case "function_call":
			if it["name"] != want["name"] || !replay.SameJSON(str(it["arguments"]), str(want["arguments"])) {
				continue
			}
		case "message":
			if it["phase"] != want["phase"] {
				continue
			}
		}
		return true
	}
	return false
}
