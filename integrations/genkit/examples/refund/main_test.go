package main

import (
	"log/slog"
	"testing"

	"github.com/firebase/genkit/go/core/logger"
)

// TestRun: approved, the draft is made once however often the model and
// the user repeat the call; declined, never.
func TestRun(t *testing.T) {
	logger.SetLevel(slog.LevelWarn)
	for approve, want := range map[bool]int{true: 1, false: 0} {
		n, err := run(approve)
		if err != nil {
			t.Fatalf("approve=%v: %v", approve, err)
		}
		if n != want {
			t.Errorf("approve=%v: %d drafts, want %d", approve, n, want)
		}
	}
}
