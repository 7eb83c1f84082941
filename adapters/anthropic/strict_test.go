package tganthropic_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/internal/toolstest"
	"github.com/toolguard/toolguard/toolset"
)

// Absent nullable members are filled with null for a strict schema only:
// to a schema written elsewhere absent is not null.
func TestFillOnlyStrictSchemas(t *testing.T) {
	var msg sdk.Message
	if err := json.Unmarshal([]byte(`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"tu_1","name":"search","input":{"q":"x"}}]}`), &msg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool toolset.Declared
		args string
	}{
		{toolstest.Search(), `{"limit":null,"q":"x"}`},
		{toolstest.LooseSearch(), `{"q":"x"}`},
	} {
		calls := tganthropic.Calls(&msg, []toolset.Declared{tc.tool})
		if len(calls) != 1 || calls[0].Arguments != tc.args {
			t.Errorf("strict %t: calls %+v, want arguments %s", tc.tool.Schema().Strict(), calls, tc.args)
		}
	}
}
