package main

import (
	"testing"

	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestOffline runs the example on the SDK's test environment: approved,
// the shop makes one draft, however often the model asks; denied, none.
func TestOffline(t *testing.T) {
	frameworktest.WantDraftOnce(t, func(approve bool) (int, error) {
		return run("", "default", "toolguard-refund", approve)
	})
}
