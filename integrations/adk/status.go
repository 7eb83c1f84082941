package tgadk

import (
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/toolutils"
	"google.golang.org/genai"

	"github.com/toolguard/toolguard/toolset"
)

// statusTool is the status tool as an ADK tool: a call is answered by a
// status query for the caller's principal (guard.Guard.QueryStatus).
type statusTool struct {
	a *Guarded
	d *toolset.Tool[toolset.StatusInput, struct{}]
}

var _ tool.Tool = (*statusTool)(nil)

// Name, Description and IsLongRunning implement tool.Tool.
func (t *statusTool) Name() string        { return t.d.Name() }
func (t *statusTool) Description() string { return t.d.Description() }
func (t *statusTool) IsLongRunning() bool { return false }

// Declaration is the status tool's strict schema, as every entry point
// offers it.
func (t *statusTool) Declaration() *genai.FunctionDeclaration { return declaration(t.d) }

// ProcessRequest adds the declaration to the model request.
func (t *statusTool) ProcessRequest(_ agent.Context, req *model.LLMRequest) error {
	return toolutils.PackTool(req, t)
}

// Run validates the arguments against the status tool's schema
// (toolset.ParseStatus; an absent tool reads as null) and answers with
// the status query's model result, for the caller's principal (the host
// step answers the status tool).
func (t *statusTool) Run(ctx agent.Context, args any) (map[string]any, error) {
	m, _ := args.(map[string]any)
	return t.a.dispatch(ctx, t.d.Name(), m)
}
