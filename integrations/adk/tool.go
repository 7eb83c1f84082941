package tgadk

import (
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/toolutils"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/toolset"
)

// adkTool is one tool of the guard's set as an ADK function tool: ADK
// declares it to the model and calls Run, which dispatches to the guard.
type adkTool struct {
	a *Guarded
	d toolset.Declared
}

var _ tool.Tool = (*adkTool)(nil)

// Name, Description and IsLongRunning implement tool.Tool.
func (t *adkTool) Name() string        { return t.d.Name() }
func (t *adkTool) Description() string { return t.d.Description() }
func (t *adkTool) IsLongRunning() bool { return false }

// Declaration gives the model the tool's own schema: the one the guard
// validates the arguments against. An imported ADK tool keeps the
// declaration its tool gave.
func (t *adkTool) Declaration() *genai.FunctionDeclaration {
	if it, ok := t.d.(*Tool); ok {
		d := *it.decl
		return &d
	}
	return declaration(t.d)
}

func declaration(d toolset.Declared) *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: d.Name(), Description: d.Description(), ParametersJsonSchema: d.Schema().Map()}
}

// ProcessRequest adds the declaration to the model request.
func (t *adkTool) ProcessRequest(_ agent.Context, req *model.LLMRequest) error {
	return toolutils.PackTool(req, t)
}

// Run dispatches the call through the guard and returns the model result
// as the function response.
func (t *adkTool) Run(ctx agent.Context, args any) (map[string]any, error) {
	m, _ := args.(map[string]any)
	return t.a.dispatch(ctx, t.d.Name(), m)
}
