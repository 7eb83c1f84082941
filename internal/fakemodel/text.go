package fakemodel

import (
	"bytes"
	"encoding/json"
	"strings"
)

// contentText returns what a content field holds as text, as the APIs take it
// either way: a JSON string's value ("" for null or nothing), or the
// concatenated "text" of an array of content parts. It returns false,
// and "", when raw is neither.
func contentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", true
	}
	if raw[0] != '[' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
}
