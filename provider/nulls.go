package provider

import (
	"github.com/toolguard/toolguard/internal/canon"
)

// FillNulls returns the arguments with every absent member whose schema
// allows null present as null, for providers without a strict mode: the
// schema lists every member as required and the optional ones as nullable,
// and contract section 3 reads an absent nullable member as null. An absent
// member that does not allow null stays absent (INVALID_ARGUMENTS), and
// arguments that are not a valid JSON object are returned unchanged for the
// guard to refuse. Nested objects and array items are filled where their
// schema is written inline; a $ref is not followed.
func FillNulls(schema map[string]any, args []byte) []byte {
	_, v, err := canon.Parse(args, canon.Limits{})
	if err != nil {
		return args
	}
	if _, ok := v.(map[string]any); !ok || !fill(schema, v) {
		return args
	}
	return canon.AppendValue(nil, v)
}

// fill fills v in place and reports whether it changed anything.
func fill(schema map[string]any, v any) bool {
	changed := false
	for _, alt := range alternatives(schema) {
		switch x := v.(type) {
		case map[string]any:
			props, _ := alt["properties"].(map[string]any)
			for name, ps := range props {
				sub, _ := ps.(map[string]any)
				if val, ok := x[name]; ok {
					changed = fill(sub, val) || changed
				} else if allowsNull(sub) {
					x[name] = nil
					changed = true
				}
			}
		case []any:
			items, _ := alt["items"].(map[string]any)
			for _, e := range x {
				changed = fill(items, e) || changed
			}
		}
	}
	return changed
}

// alternatives returns the schema and the branches of its anyOf.
func alternatives(schema map[string]any) []map[string]any {
	if schema == nil {
		return nil
	}
	out := []map[string]any{schema}
	if branches, ok := schema["anyOf"].([]any); ok {
		for _, a := range branches {
			if m, ok := a.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

func allowsNull(schema map[string]any) bool {
	for _, alt := range alternatives(schema) {
		switch t := alt["type"].(type) {
		case string:
			if t == "null" {
				return true
			}
		case []any:
			for _, e := range t {
				if e == "null" {
					return true
				}
			}
		}
	}
	return false
}
