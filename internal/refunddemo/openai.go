package refunddemo

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/internal/fakemodel"
)

// modelTurns is how many requests the story's longest run makes of the
// model: the order read, the draft asked for, the draft repeated, the
// answer.
const modelTurns = 4

// OpenAITurns returns the script as the turns of a fake OpenAI Responses
// server, fakemodel.NewOpenAI(OpenAITurns()...), for an example whose
// model is an openai-go client. A server plays one turn per request (and
// answers "done" once they are used up), so there are as many as the
// story's longest run asks for; each plays Next on the request's last
// input item. The model must send the whole conversation
// (tgopenai.ModelOptions.Stateless): the tool whose result it reads is
// named by the request's function_call of the result's call id. Its calls
// carry a call id of their own, random (callID).
func OpenAITurns() []fakemodel.Turn {
	turns := make([]fakemodel.Turn, modelTurns)
	for i := range turns {
		turns[i] = fakemodel.Turn{Respond: openAIReply}
	}
	return turns
}

// OpenAIModel returns the script as the model of an engine that needs a
// provider (durable.Runner): an openai-go client of a fake Responses
// server playing OpenAITurns, offline. It is Stateless, since the script
// reads the whole conversation. Close the server when done.
func OpenAIModel() (*tgopenai.Model, *fakemodel.OpenAIServer) {
	srv := fakemodel.NewOpenAI(OpenAITurns()...)
	model := tgopenai.NewModel(oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline")),
		tgopenai.ModelOptions{Name: "refunddemo-script", Stateless: true})
	return model, srv
}

// openAIReply is Next's reply to req as a turn: the conversation's last
// turn is a tool's result when the request's last input item is a
// function_call_output, a user's turn otherwise.
func openAIReply(in fakemodel.Request) *fakemodel.Turn {
	req := in.(fakemodel.OpenAIRequest)
	var r Reply
	if n := len(req.Input); n == 0 || req.Input[n-1].Type != "function_call_output" {
		r = Next("", nil, nil)
	} else {
		outs := req.Results()
		out := outs[len(outs)-1]
		tool := ""
		for _, it := range req.Input {
			if it.Type == "function_call" && it.CallID == out.CallID {
				tool = it.Name
			}
		}
		if tool == "" {
			return &fakemodel.Turn{Text: "refunddemo: the request has no function_call " + out.CallID + ": is the model stateless?"}
		}
		res, err := out.ModelResult()
		r = Next(tool, &res, err)
	}
	if r.Tool == "" {
		return &fakemodel.Turn{Text: r.Text}
	}
	args, _ := json.Marshal(r.Arguments) // strings: it cannot fail
	return &fakemodel.Turn{Calls: []fakemodel.Call{{Name: r.Tool, Arguments: string(args), CallID: callID()}}}
}

// callID is a call id unique to the process's calls, as a real provider's
// are: a fake server numbers its calls from 1, and a store that outlives
// the server (the DBOS example's, in Postgres) binds each call id to its
// intent, so the next server's call_0001 would replay the last run's.
func callID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
