package tgeino_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/toolguard/toolguard/host"
	tgeino "github.com/toolguard/toolguard/integrations/eino"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// recording is the scripted model keeping, as JSON, every input it was
// given whole: what Eino sent it, not only the tool messages.
type recording struct {
	*script
	mu     sync.Mutex
	inputs []string
}

func (r *recording) record(input []*schema.Message) {
	b, _ := json.Marshal(input)
	r.mu.Lock()
	r.inputs = append(r.inputs, string(b))
	r.mu.Unlock()
}

func (r *recording) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	r.record(input)
	return r.script.Generate(ctx, input, opts...)
}

func (r *recording) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	r.record(input)
	return r.script.Stream(ctx, input, opts...)
}

func (r *recording) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	if _, err := r.script.WithTools(tools); err != nil {
		return nil, err
	}
	return r, nil
}

// TestSecretsNeverLeave: a guarded tool run by an Eino ChatModelAgent
// returns a declared secret and, in its text, a key nobody declared, which
// the guard's detector finds. The model's next input (every message Eino
// sends it), the audit log, the spans and the log lines hold neither
// value; the tool message the model is given holds the placeholders
// instead.
func TestSecretsNeverLeave(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "invoke", true: "stream"}[streaming], func(t *testing.T) {
			s := frameworktest.NewSecrets(t)
			eg, err := tgeino.New(s.Guard, s.Tools, host.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := &recording{script: newScript(callTool(frameworktest.VaultTool, frameworktest.VaultArguments), say("rotated"))}
			ctx := context.Background()
			agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
				Name: "vault", Description: "Rotates keys.", Instruction: "Help the user with their keys.",
				Model: m, ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: eg.ToolsNodeConfig()},
			})
			if err != nil {
				t.Fatal(err)
			}
			runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: newCheckpoints(), EnableStreaming: streaming})
			rctx := host.WithScope(host.WithPrincipal(ctx, frameworktest.SecretsUser), "run-secret")
			if o := drain(t, runner.Query(rctx, "rotate the billing key", adk.WithCheckPointID("run-secret"))); o.final != "rotated" {
				t.Fatalf("run ended %+v", o)
			}
			m.mu.Lock()
			inputs := append([]string(nil), m.inputs...)
			m.mu.Unlock()
			if len(inputs) != 2 {
				t.Fatalf("the model got %d inputs, want 2", len(inputs))
			}
			m.script.mu.Lock()
			results := m.script.results
			m.script.mu.Unlock()
			if len(results) != 1 {
				t.Fatalf("the model was sent %d tool messages, want 1", len(results))
			}
			s.WantWithheld(t, map[string]string{
				"the tool message the model was sent": results[0].Content,
				"the model's next input":              inputs[1],
			})
		})
	}
}
