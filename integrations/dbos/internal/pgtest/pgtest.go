// Package pgtest gives the module's tests a Postgres of their own: a
// throwaway cluster (initdb in a temporary directory, on a free port of
// 127.0.0.1), removed when they end.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Server is a throwaway Postgres cluster.
type Server struct {
	base string // the URL without a database
	stop func()
}

// Start starts a throwaway cluster; the error says why there is none
// (no Postgres binaries, most often).
func Start() (*Server, error) { return startCluster() }

// URL is the URL of the database name on the server (DBOS creates it).
func (s *Server) URL(name string) string { return s.base + "/" + name + "?sslmode=disable" }

// Stop stops a throwaway cluster and removes its directory.
func (s *Server) Stop() { s.stop() }

// binDirs are where the Postgres binaries are looked for after PATH.
var binDirs = []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}

// binary finds a Postgres binary on PATH or in binDirs.
func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range binDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("the Postgres binary %q is not on PATH nor in %s", name, strings.Join(binDirs, ", "))
}

// startCluster runs initdb into a temporary directory and starts the
// server on a free port of 127.0.0.1 (trust authentication, no fsync).
// As root, it runs them as the postgres user, which Postgres requires.
func startCluster() (*Server, error) {
	initdb, err := binary("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := binary("pg_ctl")
	if err != nil {
		return nil, err
	}
	if _, err := binary("postgres"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tgdbos-pg-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, Postgres needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	run := func(bin string, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd.CombinedOutput()
	}
	if out, err := run(initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", port, dir)
	if out, err := run(pgctl, "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	return &Server{base: fmt.Sprintf("postgres://postgres@127.0.0.1:%d", port), stop: func() {
		if out, err := run(pgctl, "-D", data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
			fmt.Fprintf(os.Stderr, "pg_ctl stop: %v: %s\n", err, out)
		}
		os.RemoveAll(dir)
	}}, nil
}

// FreePort returns a TCP port of 127.0.0.1 nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
