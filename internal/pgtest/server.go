package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a Postgres cluster of a test's own: initdb in a temporary
// directory, trust authentication, on a free port of 127.0.0.1 between
// 19700 and 19799 (the range the repository's Postgres tests use). Tests
// that stop, kill, restart or promote a server use one, never the
// machine's. It is stopped and removed when the test ends.
type Server struct {
	Port int
	tb   testing.TB
	dir  string // the temporary directory: data, socket, log
	data string
	bin  string
	cred *syscall.Credential
	opts string // the server's command-line settings
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// Durable keeps fsync and synchronous_commit on: for tests about
	// what survives a crash. Otherwise both are off (faster, and a crash
	// of the server still keeps what the OS has).
	Durable bool
	// Settings are more name=value server settings.
	Settings []string
}

// binDirs are where the Postgres binaries are looked for after PATH.
var binDirs = []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/14/bin", "/usr/lib/postgresql/13/bin"}

// binDir returns the directory of initdb, pg_ctl and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// The directory of the binaries, not of a link to one (Debian's
		// pg_basebackup is beside initdb, not beside its link).
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	for _, d := range binDirs {
		if st, err := os.Stat(filepath.Join(d, "initdb")); err == nil && !st.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb is not on PATH nor in %s (apt-get install postgresql)", strings.Join(binDirs, ", "))
}

// ports hands out the ports of 19700–19799 this process has not used.
var ports struct {
	sync.Mutex
	next int
}

// freePort returns a port of 19700–19799 nobody listens on now.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	for range 100 {
		p := 19700 + ports.next%100
		ports.next++
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port in 19700-19799")
}

// StartServer starts a server of the test's own, or skips the test (fails
// it under CI) when the Postgres binaries are not installed.
func StartServer(tb testing.TB, opts ServerOptions) *Server {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		Unavailable(tb, err.Error())
	}
	dir, err := os.MkdirTemp("", "tg-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb, dir: dir, data: filepath.Join(dir, "data"), bin: bin}
	tb.Cleanup(func() {
		s.Stop("immediate")
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		// Postgres refuses to run as root: run it as postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(tb, "running as root, Postgres needs the postgres user: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	if out, err := s.run("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v: %s", err, out)
	}
	settings := []string{"listen_addresses=127.0.0.1", "max_connections=200", "wal_level=replica", "max_wal_senders=10",
		"shared_buffers=32MB", "log_min_messages=warning"}
	if opts.Durable {
		settings = append(settings, "fsync=on", "synchronous_commit=on", "full_page_writes=on")
	} else {
		settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
	}
	settings = append(settings, opts.Settings...)
	s.configure(settings)
	s.Start()
	return s
}

// configure picks a port and writes the server's settings.
func (s *Server) configure(settings []string) {
	port, err := freePort()
	if err != nil {
		s.tb.Fatal(err)
	}
	s.Port = port
	var b strings.Builder
	fmt.Fprintf(&b, "-p %d -k %s", port, s.dir)
	for _, kv := range settings {
		fmt.Fprintf(&b, " -c %s", kv)
	}
	s.opts = b.String()
}

// run runs a Postgres binary, as the postgres user when root.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// URL returns the URL of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?connect_timeout=5&sslmode=disable", s.Port, db)
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	if out, err := s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-o", s.opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.tb.Fatalf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
}

// Stop stops the server: mode fast (sessions are ended, a checkpoint
// taken) or immediate (no checkpoint: recovery from the WAL at the next
// start). A server that is not running is left so.
func (s *Server) Stop(mode string) {
	_, _ = s.run("pg_ctl", "-D", s.data, "-m", mode, "-w", "-t", "60", "stop")
}

// Kill kills the server with SIGKILL, the postmaster and every process
// it started: a crash of the machine as far as Postgres can tell (what
// was not fsynced may be lost only with fsync off).
func (s *Server) Kill() {
	s.tb.Helper()
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		s.tb.Fatalf("no postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		s.tb.Fatal(err)
	}
	children := childrenOf(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	for range 500 {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = os.Remove(filepath.Join(s.data, "postmaster.pid"))
}

// childrenOf returns the pids whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces: read after ')'.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// Standby makes a streaming standby of s (pg_basebackup) on a port of its
// own, named name, and starts it. With synchronous set, s waits for it:
// synchronous_standby_names = name and synchronous_commit = on, so that a
// commit s acknowledges is in the standby's WAL too.
func (s *Server) Standby(name string, synchronous bool) *Server {
	s.tb.Helper()
	return s.StandbyVia(name, synchronous, fmt.Sprintf("127.0.0.1:%d", s.Port))
}

// StandbyVia is Standby reaching s at addr (host:port): a proxy, to stall
// or cut its stream.
func (s *Server) StandbyVia(name string, synchronous bool, addr string) *Server {
	s.tb.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		s.tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tg-pg-standby-")
	if err != nil {
		s.tb.Fatal(err)
	}
	st := &Server{tb: s.tb, dir: dir, data: filepath.Join(dir, "data"), bin: s.bin, cred: s.cred}
	s.tb.Cleanup(func() {
		st.Stop("immediate")
		os.RemoveAll(dir)
	})
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			s.tb.Fatal(err)
		}
	}
	if out, err := s.run("pg_basebackup", "-h", host, "-p", port, "-U", "postgres", "-D", st.data,
		"-R", "-X", "stream", "-c", "fast", "--no-sync", "-d", "application_name="+name); err != nil {
		s.tb.Fatalf("pg_basebackup: %v: %s", err, out)
	}
	st.configure([]string{"listen_addresses=127.0.0.1", "max_connections=200", "wal_level=replica", "max_wal_senders=10",
		"shared_buffers=32MB", "hot_standby=on", "fsync=on", "synchronous_commit=on"})
	st.Start()
	if synchronous {
		s.Exec("ALTER SYSTEM SET synchronous_standby_names = '" + name + "'")
		s.Exec("ALTER SYSTEM SET synchronous_commit = on")
		s.Exec("SELECT pg_reload_conf()")
		// Wait until the standby is streaming, and synchronous.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var state string
			err := s.Scan("SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", []any{name}, &state)
			if err == nil && state == "sync" {
				break
			}
			if time.Now().After(deadline) {
				s.tb.Fatalf("the standby %s is not synchronous after 30s (%q, %v)", name, state, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return st
}

// Promote promotes a standby to a primary and waits until it is one.
func (s *Server) Promote() {
	s.tb.Helper()
	if out, err := s.run("pg_ctl", "-D", s.data, "-w", "-t", "60", "promote"); err != nil {
		s.tb.Fatalf("pg_ctl promote: %v: %s", err, out)
	}
}

// Exec runs a statement on the server's postgres database, failing the
// test if it fails.
func (s *Server) Exec(sql string, args ...any) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		s.tb.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		s.tb.Fatalf("%s: %v", sql, err)
	}
}

// Scan runs a query on the server's postgres database and scans its one
// row into dest.
func (s *Server) Scan(sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, sql, args...).Scan(dest...)
}

// CreateDB creates database name on the server.
func (s *Server) CreateDB(name string) string {
	s.tb.Helper()
	s.Exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize())
	return s.URL(name)
}
