package main

import (
	"testing"

	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestRun: approved, the draft is made once however often the model and
// the user repeat the call; declined, never.
func TestRun(t *testing.T) { frameworktest.WantDraftOnce(t, run) }
