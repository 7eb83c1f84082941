package tgchat_test

import (
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgchat "github.com/toolguard/toolguard/adapters/chat"
	"github.com/toolguard/toolguard/adapters/internal/runtest"
)

// FuzzReply serves arbitrary bytes as the Chat Completions API's reply, a
// JSON completion or a stream of chunks, to the real openai-go client, and
// runs the loop over them: no panic reaches the host, the run ends once or
// fails with an error, and every result the model gets is a model result.
func FuzzReply(f *testing.F) {
	completion := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_order","arguments":"{\"order_ref\":\"ORDER-7\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	done := `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`
	for _, body := range []string{completion, done, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, `{}`, ``} {
		f.Add([]byte(body), false)
	}
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta +
			`,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	stream := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_order","arguments":"{\"order_ref\""}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":":\"ORDER-7\"}"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_order","arguments":"{}"}}]}`, "null") +
		chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n"
	f.Add([]byte(stream), true)
	f.Add([]byte(chunk(`{"content":"hi"}`, "null")+`data: {"error":{"message":"busy","type":"server_error","code":null}}`+"\n\n"), true)
	f.Add([]byte(``), true)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		srv := runtest.BodyServer(t, body, stream)
		client := oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		runtest.Untrusted(t, tgchat.NewModel(client, tgchat.ModelOptions{}), stream)
	})
}
