package tgopenai_test

import (
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolguard/toolguard/adapters/internal/runtest"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
)

// FuzzReply serves arbitrary bytes as the Responses API's reply, a JSON
// response or an event stream, to the real openai-go client, and runs the
// loop over them, chained and stateless: no panic reaches the host, the
// run ends once or fails with an error, and every result the model gets
// is a model result.
func FuzzReply(f *testing.F) {
	call := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_order","arguments":"{\"order_ref\":\"ORDER-7\"}","status":"completed"}`
	resp := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[` + call + `],` +
		`"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}`
	done := `{"id":"resp_2","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"m_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[]}]}]}`
	for _, body := range []string{resp, done, `{"id":"resp_3","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, `{}`, ``} {
		f.Add([]byte(body), false)
	}
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	stream := ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_order","arguments":"","status":"in_progress"}}`) +
		ev("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":2,"output_index":0,"item_id":"fc_1","delta":"{\"order_ref\":\"ORDER-7\"}"}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+call+`}`) +
		ev("response.completed", `{"type":"response.completed","sequence_number":4,"response":`+resp+`}`)
	f.Add([]byte(stream), true)
	f.Add([]byte(ev("error", `{"type":"error","sequence_number":1,"code":"server_error","message":"busy","param":null}`)), true)
	f.Add([]byte(``), true)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		srv := runtest.BodyServer(t, body, stream)
		client := oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		for _, stateless := range []bool{false, true} {
			runtest.Untrusted(t, tgopenai.NewModel(client, tgopenai.ModelOptions{Stateless: stateless}), stream)
		}
	})
}
