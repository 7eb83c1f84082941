package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NeedBinaries skips tb unless every named program (e.g. "redis-server",
// "redis-cli") is on PATH. Tests that start servers of their own call it
// first: CI installs Redis, a bare machine skips them with a message that
// says what is missing.
func NeedBinaries(tb testing.TB, names ...string) {
	tb.Helper()
	if missing := missingBinaries(names); len(missing) > 0 {
		noteSkip(tb, strings.Join(missing, " and ")+" not installed", "apt-get install redis-server; CI installs it")
		tb.Skip(strings.Join(missing, " and ") + " not installed: skipping a test that starts its own Redis servers " +
			"(CI installs them; apt-get install redis-server)")
	}
}

// missingBinaries returns the names that are not on PATH.
func missingBinaries(names []string) []string {
	var missing []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// pollInterval is how often WaitUntil asks its condition again.
const pollInterval = 10 * time.Millisecond

// WaitUntil asks cond every 10 ms until it returns true or timeout has
// passed, and reports whether it returned true. Tests poll with it instead
// of sleeping for a guessed time, and fail with their own message when it
// reports false.
func WaitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// CreateCluster joins running cluster-enabled servers into one cluster
// with `redis-cli --cluster create`, with replicas replicas per master
// (redis-cli picks which servers are masters: the first ones listed). It
// returns redis-cli's output; the caller waits for cluster_state:ok.
func CreateCluster(ctx context.Context, replicas int, addrs ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "redis-cli", createArgs(replicas, addrs)...).CombinedOutput()
}

func createArgs(replicas int, addrs []string) []string {
	args := append([]string{"--cluster", "create"}, addrs...)
	return append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
}

// Reshard moves n hash slots, with their keys, from the master whose node
// id is from to the master whose node id is to, through the cluster node
// at seed, with `redis-cli --cluster reshard` and no questions asked. It
// returns redis-cli's output. Clients keep running meanwhile: they meet
// MOVED, ASK and TRYAGAIN replies.
func Reshard(ctx context.Context, seed, from, to string, n int) ([]byte, error) {
	return exec.CommandContext(ctx, "redis-cli", reshardArgs(seed, from, to, n)...).CombinedOutput()
}

func reshardArgs(seed, from, to string, n int) []string {
	return []string{"--cluster", "reshard", seed, "--cluster-from", from, "--cluster-to", to,
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes"}
}

// StartServer runs a redis-server of the test's own on 127.0.0.1:port,
// with the append-only file fsynced on every write, in dir; extra adds
// server arguments (later ones win). It waits until the server answers,
// and kills it when tb's test ends. Call NeedBinaries first.
func StartServer(tb testing.TB, dir string, port int, extra ...string) *exec.Cmd {
	tb.Helper()
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--logfile", ""}
	cmd := exec.Command("redis-server", append(args, extra...)...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i > 200 {
			tb.Fatal("redis-server did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	return cmd
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
