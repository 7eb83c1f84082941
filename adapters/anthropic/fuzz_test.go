package tganthropic_test

import (
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/adapters/internal/runtest"
)

// FuzzReply serves arbitrary bytes as the Messages API's reply, a JSON
// message or an event stream, to the real anthropic-sdk-go client, and
// runs the loop over them: no panic reaches the host, the run ends once or
// fails with an error, and every result the model gets is a model result.
func FuzzReply(f *testing.F) {
	msg := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Looking."},` +
		`{"type":"tool_use","id":"toolu_1","name":"get_order","input":{"order_ref":"ORDER-7"}}],"stop_reason":"tool_use",` +
		`"usage":{"input_tokens":3,"output_tokens":2}}`
	done := `{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
	for _, body := range []string{msg, done, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, `{}`, ``} {
		f.Add([]byte(body), false)
	}
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	stream := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":0}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_order","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"order_ref\":"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"ORDER-7\"}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	f.Add([]byte(stream), true)
	f.Add([]byte(ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[]}}`)+
		ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`)), true)
	f.Add([]byte(``), true)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		srv := runtest.BodyServer(t, body, stream)
		client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		runtest.Untrusted(t, tganthropic.NewModel(client, tganthropic.ModelOptions{}), stream)
	})
}
