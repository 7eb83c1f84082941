// Package toolstest has a tool in two forms for the provider adapters'
// tests: with the strict schema toolset derives, and with a schema written
// elsewhere (as a remote MCP tool's is), compiled by toolset.CompileSchema.
package toolstest

import (
	"context"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// SearchIn is the input of Search: a query and an optional limit.
type SearchIn struct {
	Q     string `json:"q"`
	Limit *int   `json:"limit"`
}

// LooseSchema is the search tool's schema as a server might write it: limit
// is optional (absent is not null) and the object is open.
const LooseSchema = `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":["integer","null"]}},"required":["q"]}`

// Search returns the read tool "search", with its strict derived schema.
func Search() toolset.Declared {
	return toolset.Read("search", "Search.", func(context.Context, *guard.Invocation, SearchIn) (string, error) {
		return "", nil
	}, nil)
}

// looseTool is a tool with another schema.
type looseTool struct {
	toolset.Declared
	schema *toolset.Schema
}

func (l looseTool) Schema() *toolset.Schema { return l.schema }

// LooseSearch returns Search with LooseSchema, which is not Strict.
func LooseSearch() toolset.Declared {
	s, err := toolset.CompileSchema([]byte(LooseSchema))
	if err != nil {
		panic(err)
	}
	return looseTool{Search(), s}
}
