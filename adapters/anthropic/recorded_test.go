package tganthropic_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/adapters/internal/replay"
	"github.com/toolguard/toolguard/provider"
)

// TestRecordedTraffic serves every recorded Messages API exchange, byte
// for byte as the API sent it (JSON or SSE with pings, thinking and
// signature deltas, gzip where it was), to the real anthropic-sdk-go
// client through the adapter's Model. It checks each reply's id, calls
// (ids, names, input), text and ending against the recording, and each
// follow-up request against the recorded one: the same messages, the
// assistant message sent back block for block as the API gave it (thinking
// with its signature unchanged, text, tool_use with its input), and one
// user message of tool_result blocks answering the recorded ids in order.
func TestRecordedTraffic(t *testing.T) {
	for _, rec := range replay.ForAPI(t, "anthropic") {
		t.Run(rec.Name, func(t *testing.T) {
			srv := replay.Start(t, rec)
			client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("replay"), option.WithMaxRetries(0))
			m := tganthropic.NewModel(client, tganthropic.ModelOptions{Name: "recorded"})
			replay.Drive(t, rec, srv, m, replay.Driver{Results: resultContents, Check: checkFollowUp, Usage: recordedUsage})
		})
	}
}

// recordedUsage returns the usage a recorded response reports: the
// message's, or a stream's, message_start's input tokens and the last
// message_delta's counts (whole counts, each replacing the one before).
func recordedUsage(t *testing.T, it replay.Interaction) (in, out int64) {
	payloads, err := it.Payloads()
	if err != nil {
		t.Fatal(err)
	}
	type usage struct {
		In  *int64 `json:"input_tokens"`
		Out *int64 `json:"output_tokens"`
	}
	read := func(u *usage) {
		if u != nil && u.In != nil {
			in = *u.In
		}
		if u != nil && u.Out != nil {
			out = *u.Out
		}
	}
	for _, p := range payloads {
		var ev struct {
			Usage   *usage `json:"usage"`
			Message *struct {
				Usage *usage `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(p, &ev) != nil {
			continue
		}
		if ev.Message != nil {
			read(ev.Message.Usage)
		}
		read(ev.Usage)
	}
	return in, out
}

// messages returns a request's messages, each with its content as blocks
// (a content string as one text block).
func messages(req map[string]any) []map[string]any {
	list, _ := req["messages"].([]any)
	var out []map[string]any
	for _, it := range list {
		m, _ := it.(map[string]any)
		if s, ok := m["content"].(string); ok {
			m["content"] = []any{map[string]any{"type": "text", "text": s}}
		}
		out = append(out, m)
	}
	return out
}

func blocks(m map[string]any) []map[string]any {
	list, _ := m["content"].([]any)
	var out []map[string]any
	for _, b := range list {
		if bm, ok := b.(map[string]any); ok {
			out = append(out, bm)
		}
	}
	return out
}

// lastTurn returns the last assistant message of a request and the
// tool_result blocks of the user message after it.
func lastTurn(req map[string]any) (asst map[string]any, results []map[string]any) {
	msgs := messages(req)
	for i, m := range msgs {
		if m["role"] != "assistant" {
			continue
		}
		asst, results = m, nil
		if i+1 < len(msgs) {
			for _, b := range blocks(msgs[i+1]) {
				if b["type"] == "tool_result" {
					results = append(results, b)
				}
			}
		}
	}
	return asst, results
}

// resultText returns a tool_result's content: its string, or its text
// blocks joined.
func resultText(b map[string]any) string {
	if s, ok := b["content"].(string); ok {
		return s
	}
	var sb strings.Builder
	for _, c := range blocks(b) {
		s, _ := c["text"].(string)
		sb.WriteString(s)
	}
	return sb.String()
}

func resultContents(req map[string]any) []string {
	_, results := lastTurn(req)
	var out []string
	for _, b := range results {
		out = append(out, resultText(b))
	}
	return out
}

// blockKey is what of a block must come back unchanged: its type, and its
// text, thinking and signature, redacted data, or tool_use id, name and
// input.
func blockKey(b map[string]any) string {
	switch b["type"] {
	case "text":
		return fmt.Sprintf("text %q", b["text"])
	case "thinking":
		return fmt.Sprintf("thinking %q signature %q", b["thinking"], b["signature"])
	case "redacted_thinking":
		return fmt.Sprintf("redacted_thinking %q", b["data"])
	case "tool_use":
		in, _ := json.Marshal(b["input"])
		return fmt.Sprintf("tool_use %v %v %s", b["id"], b["name"], in)
	}
	return fmt.Sprint(b["type"])
}

func checkFollowUp(t *testing.T, i int, sent, recorded map[string]any, prev *provider.Reply) {
	t.Helper()
	asst, results := lastTurn(sent)
	if asst == nil {
		t.Fatalf("request %d sends no assistant message", i)
	}
	if len(results) != len(prev.Calls) {
		t.Fatalf("request %d: %d tool_result blocks, want one per call (%d)", i, len(results), len(prev.Calls))
	}
	for j, c := range prev.Calls {
		if results[j]["tool_use_id"] != c.ID || results[j]["is_error"] == true {
			t.Errorf("request %d: tool_result %d answers %v (is_error %v), want %s", i, j, results[j]["tool_use_id"], results[j]["is_error"], c.ID)
		}
	}
	if recorded == nil {
		return
	}
	var got, want []string
	for _, m := range messages(sent) {
		got = append(got, m["role"].(string))
	}
	for _, m := range messages(recorded) {
		want = append(want, m["role"].(string))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("request %d: messages %v, recorded %v", i, got, want)
	}
	rasst, rresults := lastTurn(recorded)
	var gotBlocks, wantBlocks []string
	for _, b := range blocks(asst) {
		gotBlocks = append(gotBlocks, blockKey(b))
	}
	for _, b := range blocks(rasst) {
		wantBlocks = append(wantBlocks, blockKey(b))
	}
	if strings.Join(gotBlocks, "\n") != strings.Join(wantBlocks, "\n") {
		t.Errorf("request %d: the assistant message is sent back as\n%s\nrecorded\n%s", i, strings.Join(gotBlocks, "\n"), strings.Join(wantBlocks, "\n"))
	}
	if len(rresults) != len(results) {
		t.Fatalf("request %d: %d tool_result blocks, recorded %d", i, len(results), len(rresults))
	}
	for j := range rresults {
		if results[j]["tool_use_id"] != rresults[j]["tool_use_id"] || resultText(results[j]) != resultText(rresults[j]) {
			t.Errorf("request %d: tool_result %d is %v %q, recorded %v %q", i, j, results[j]["tool_use_id"], resultText(results[j]), rresults[j]["tool_use_id"], resultText(rresults[j]))
		}
	}
}
