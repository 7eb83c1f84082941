package tggemini_test

import (
	"context"
	"testing"

	"google.golang.org/genai"

	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/adapters/internal/runtest"
)

// FuzzReply serves arbitrary bytes as the Gemini API's reply, a JSON
// response or a stream of them, to the real genai client, and runs the
// loop over them: no panic reaches the host, the run ends once or fails
// with an error, and every result the model gets is a model result.
func FuzzReply(f *testing.F) {
	call := `{"responseId":"r1","candidates":[{"content":{"role":"model","parts":[` +
		`{"functionCall":{"id":"c1","name":"get_order","args":{"order_ref":"ORDER-7"}},"thoughtSignature":"c2ln"},` +
		`{"functionCall":{"name":"create_refund_draft","args":{"order_ref":"ORDER-7","reason":"duplicate"}}}]},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}`
	text := `{"responseId":"r2","candidates":[{"content":{"role":"model","parts":[{"text":"done"}]},"finishReason":"STOP"}]}`
	partial := `{"responseId":"r3","candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_order",` +
		`"partialArgs":[{"jsonPath":"$.order_ref","stringValue":"ORD","willContinue":true}],"willContinue":true}}]}}]}`
	for _, body := range []string{call, text, partial, `{"candidates":[{"finishReason":"SAFETY"}]}`, `{"promptFeedback":{"blockReason":"SAFETY"}}`, `{}`, ``} {
		f.Add([]byte(body), false)
		f.Add([]byte("data: "+body+"\n\n"), true)
	}
	f.Add([]byte("data: "+partial+"\n\ndata: "+call+"\n\n"), true)
	f.Add([]byte(`data: {"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`+"\n\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		srv := runtest.BodyServer(t, body, stream)
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		runtest.Untrusted(t, tggemini.NewModel(client, tggemini.ModelOptions{Name: "m"}), stream)
	})
}
