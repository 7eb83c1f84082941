package cases_test

import (
	"os"
	"testing"

	"github.com/toolguard/toolguard/internal/redistest"
)

// TestMain names the tests that skipped for want of a real Redis.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
