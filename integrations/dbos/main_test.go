package tgdbos_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolguard/toolguard/internal/redistest"
)

// envRole selects a child role of the test binary (see childMain): the
// crash test runs its workflows in processes it can SIGKILL.
const envRole = "TGDBOS_TEST_ROLE"

// pgBase is the URL of the test Postgres without a database; pgErr says
// why there is none.
var (
	pgBase string
	pgErr  error
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(childMain(role))
	}
	os.Exit(func() int {
		pg, err := startPostgres()
		if err != nil {
			pgErr = err
		} else {
			pgBase = pg.base
			defer pg.stop()
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
	return pgBase + "/" + name + "?sslmode=disable"
}

// pgServer is a throwaway Postgres cluster in a temporary directory.
type pgServer struct {
	dir, data, base string
	pgctl           string
	cred            *syscall.Credential
}

// pgBinDirs are where the Postgres binaries are looked for after PATH.
var pgBinDirs = []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}

// pgBinary finds a Postgres binary on PATH or in pgBinDirs.
func pgBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range pgBinDirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("the Postgres binary %q is not on PATH nor in %s", name, strings.Join(pgBinDirs, ", "))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startPostgres runs initdb into a temporary directory and starts the
// server on a free port of 127.0.0.1 (trust authentication, no fsync).
// As root, it runs them as the postgres user, which Postgres requires.
func startPostgres() (*pgServer, error) {
	initdb, err := pgBinary("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := pgBinary("pg_ctl")
	if err != nil {
		return nil, err
	}
	if _, err := pgBinary("postgres"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tgdbos-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{dir: dir, data: filepath.Join(dir, "data"), pgctl: pgctl}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, Postgres needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := s.run(initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, dir)
	if out, err := s.run(pgctl, "-D", s.data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	s.base = fmt.Sprintf("postgres://postgres@127.0.0.1:%d", port)
	return s, nil
}

// run runs a Postgres binary, as the postgres user when root.
func (s *pgServer) run(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// stop stops the server at once and removes its directory.
func (s *pgServer) stop() {
	if out, err := s.run(s.pgctl, "-D", s.data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
		fmt.Fprintf(os.Stderr, "pg_ctl stop: %v: %s\n", err, out)
	}
	os.RemoveAll(s.dir)
}

// freePort returns a TCP port of 127.0.0.1 nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errNoRole is a child's error for an unknown role.
var errNoRole = errors.New("unknown child role")

// deadline bounds every wait of the tests.
const deadline = 60 * time.Second
