package tgmcp

import (
	"encoding/json"
	"slices"

	"github.com/toolguard/toolguard/provider"
	"github.com/toolguard/toolguard/toolset"
)

// MCP has no strict mode: a client, and the model behind it, may leave out
// a member it has no value for, as providers without one do. So the server
// reads arguments as contract section 3 says: an absent member whose schema
// allows null is null (provider.FillNulls, what the Anthropic, Gemini and
// Chat adapters do), for a toolset tool whose schema is strict; and it
// lists that tool with the schema that says so, the strict schema with
// those members no longer required (InputSchema). The listed schema accepts
// exactly the arguments that, filled, the strict schema accepts: a client
// that validates against it and the guard agree. A schema that is not
// strict (a tool imported from another server) is listed and read as it is.

// InputSchema returns the inputSchema the server lists for t: t's schema,
// and for a strict schema (toolset.Schema.Strict) the same with every
// member whose schema allows null left out of required, at the top level,
// in nested objects and in array items written inline (a $ref is not
// followed, as provider.FillNulls does not follow one). Arguments that
// omit such a member are read as if it were null.
func InputSchema(t toolset.Declared) json.RawMessage {
	s := t.Schema()
	if !s.Strict() {
		return s.JSON()
	}
	m := s.Map()
	optionalNulls(m)
	b, err := json.Marshal(m)
	if err != nil {
		return s.JSON()
	}
	return b
}

// fillArgs returns the arguments of a call of t as the guard is to see
// them: for a strict schema, every absent member that allows null present
// as null; otherwise as they came.
func fillArgs(t toolset.Declared, args []byte) []byte {
	if t == nil || !t.Schema().Strict() {
		return args
	}
	return provider.FillNulls(t.Schema().Map(), args)
}

// optionalNulls drops from required, in schema and its anyOf branches, the
// properties whose schema allows null, and does the same in every property
// and items schema below: the members provider.FillNulls fills.
func optionalNulls(schema map[string]any) {
	if schema == nil {
		return
	}
	alts := []map[string]any{schema}
	branches, _ := schema["anyOf"].([]any)
	for _, b := range branches {
		if m, ok := b.(map[string]any); ok {
			alts = append(alts, m)
		}
	}
	for _, alt := range alts {
		if props, ok := alt["properties"].(map[string]any); ok {
			var filled []string
			for name, ps := range props {
				sub, _ := ps.(map[string]any)
				if fillsNull(sub) {
					filled = append(filled, name)
				}
				optionalNulls(sub)
			}
			if req, ok := alt["required"].([]any); ok {
				req = slices.DeleteFunc(req, func(v any) bool {
					name, _ := v.(string)
					return slices.Contains(filled, name)
				})
				if len(req) == 0 {
					delete(alt, "required")
				} else {
					alt["required"] = req
				}
			}
		}
		if items, ok := alt["items"].(map[string]any); ok {
			optionalNulls(items)
		}
	}
}

// fillsNull reports whether provider.FillNulls fills an absent member of
// schema sub with null: asked of FillNulls itself, so that the two never
// disagree on what allows null.
func fillsNull(sub map[string]any) bool {
	probe := map[string]any{"type": "object", "properties": map[string]any{"m": sub}}
	return string(provider.FillNulls(probe, []byte("{}"))) != "{}"
}
