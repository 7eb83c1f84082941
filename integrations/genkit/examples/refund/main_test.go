package main

import (
	"log/slog"
	"testing"

	"github.com/firebase/genkit/go/core/logger"

	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestRun: approved, the draft is made once however often the model and
// the user repeat the call; declined, never.
func TestRun(t *testing.T) {
	logger.SetLevel(slog.LevelWarn)
	frameworktest.WantDraftOnce(t, run)
}
