package tggenkit_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/firebase/genkit/go/core/logger"
)

// TestMain keeps Genkit's informational logs (one per genkit.Init) out of
// the test output.
func TestMain(m *testing.M) {
	logger.SetLevel(slog.LevelWarn)
	os.Exit(m.Run())
}
