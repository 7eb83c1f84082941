package main

import (
	"os"
	"testing"

	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestRefund runs the example on the Postgres of
// $DBOS_SYSTEM_DATABASE_URL, and skips without one (the module's own
// tests start a throwaway one): approved, the shop makes one draft,
// however often the model asks; denied, none.
func TestRefund(t *testing.T) {
	pg := os.Getenv("DBOS_SYSTEM_DATABASE_URL")
	if pg == "" {
		t.Skip("no Postgres: set DBOS_SYSTEM_DATABASE_URL")
	}
	frameworktest.WantDraftOnce(t, func(approve bool) (int, error) { return run(pg, approve) })
}
