package main

import (
	"os"
	"testing"

	"github.com/toolguard/toolguard/internal/redistest"
)

// TestMain names the package's skips (no chromium, no Redis) at its end.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
