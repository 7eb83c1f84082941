package tgdbos_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/toolguard/toolguard/integrations/dbos/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// envRole selects a child role of the test binary (see childMain): the
// crash test runs its workflows in processes it can SIGKILL.
const envRole = "TGDBOS_TEST_ROLE"

// pgServer is the test Postgres; pgErr says why there is none.
var (
	pgServer *pgtest.Server
	pgErr    error
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(childMain(role))
	}
	os.Exit(func() int {
		pg, err := pgtest.Start()
		if err != nil {
			pgErr = err
		} else {
			pgServer = pg
			defer pg.Stop()
		}
		return redistest.Main(m)
	}())
}

// postgresURL returns the URL of a fresh database of the test Postgres
// (DBOS creates it), or skips t (fails it in CI) when there is none.
func postgresURL(t testing.TB, name string) string {
	t.Helper()
	if pgErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Postgres for the DBOS tests: %v", pgErr)
		}
		redistest.Skip(t, "no Postgres: "+pgErr.Error(), "install Postgres 15 (apt-get install postgresql), or run .ci/run")
	}
	return pgServer.URL(name)
}

// errNoRole is a child's error for an unknown role.
var errNoRole = errors.New("unknown child role")

// deadline bounds every wait of the tests.
const deadline = 60 * time.Second
