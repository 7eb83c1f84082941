package main

import (
	"os"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/integrations/dbos/internal/pgtest"
	"github.com/toolguard/toolguard/internal/frameworktest"
)

// TestRefund runs the example on the Postgres of
// $DBOS_SYSTEM_DATABASE_URL when set, else on a throwaway Postgres it
// starts (initdb, as the module's own tests do); without either it skips,
// and fails in CI: approved, the shop makes one draft, however often the
// model asks; denied, none.
func TestRefund(t *testing.T) {
	pg := strings.TrimSpace(os.Getenv("DBOS_SYSTEM_DATABASE_URL"))
	if pg == "" {
		s, err := pgtest.Start()
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("no Postgres for the DBOS example: %v", err)
			}
			t.Skipf("no Postgres: %v (install Postgres 15, or set DBOS_SYSTEM_DATABASE_URL)", err)
		}
		t.Cleanup(s.Stop)
		pg = s.URL("refund_example")
	}
	frameworktest.WantDraftOnce(t, func(approve bool) (int, error) { return run(pg, approve) })
}
