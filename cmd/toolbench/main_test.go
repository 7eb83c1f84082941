package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestPeerRun runs a short -peer bench on miniredis, and on the real server
// when TOOLGUARD_REDIS_URL is set, and checks what it prints adds up: every
// dispatch of both runs is counted once as a read, a write or a replay, none
// failed, the peer took exactly 3 round trips per fresh write and per read
// (it wraps reads, keyed by call id) and 1 per replay, and the guard/floor and guard/peer lines close the output. It
// makes no timing assertion.
func TestPeerRun(t *testing.T) {
	addrs := map[string]string{"miniredis": "redis://" + miniredis.RunT(t).Addr() + "/0"}
	if url := os.Getenv(redistest.EnvURL); url != "" {
		addrs["redis"] = url
	}
	for name, addr := range addrs {
		t.Run(name, func(t *testing.T) {
			const n = 400
			var out strings.Builder
			if err := run([]string{"-redis", addr, "-c", "8", "-n", strconv.Itoa(n), "-rounds", "4", "-peer"}, &out); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			t.Log("\n" + text)
			if strings.Contains(text, "unexpected:") {
				t.Error("some dispatches failed")
			}
			if !strings.Contains(text, "results:     OK "+strconv.Itoa(n)+"\n") {
				t.Errorf("the guard's results are not %d OK", n)
			}
			// The table's rows: a label, then the guard's, the peer's and
			// the floor's columns.
			rows := map[string][3]string{}
			for _, line := range strings.Split(text, "\n") {
				f := strings.Fields(line)
				if len(f) > 3 {
					rows[strings.Join(f[:len(f)-3], " ")] = [3]string(f[len(f)-3:])
				}
			}
			num := func(label string, col int) int64 {
				t.Helper()
				v, err := strconv.ParseInt(rows[label][col], 10, 64)
				if err != nil {
					t.Fatalf("row %q column %d: %v", label, col, err)
				}
				return v
			}
			for col, run := range []string{"guard", "peer"} {
				reads, writes, replays := num("reads", col), num("writes", col), num("replays", col)
				if reads+writes+replays != n {
					t.Errorf("%s: %d reads + %d writes + %d replays != %d", run, reads, writes, replays, n)
				}
				if writes == 0 || replays == 0 || reads == 0 {
					t.Errorf("%s: a kind is missing from the mix: %d/%d/%d", run, reads, writes, replays)
				}
			}
			if got, want := num("round trips", 1), 3*num("writes", 1)+3*num("reads", 1)+num("replays", 1); got != want {
				t.Errorf("peer: %d round trips, want 3 per write and read + 1 per replay = %d", got, want)
			}
			if num("calls", 0) != num("round trips", 2) || num("calls", 2) != num("round trips", 2) {
				t.Errorf("the floor ran %d calls in %d round trips, the guard %d calls", num("calls", 2), num("round trips", 2), num("calls", 0))
			}
			if num("round trips", 0) > num("calls", 0) || num("round trips", 1) != num("calls", 1) {
				t.Errorf("round trips %v, calls %v: a round trip carries one call or more, the peer's one", rows["round trips"], rows["calls"])
			}
			if num("stored dispatches", 0) != n || num("stored dispatches", 1) != num("writes", 1)+num("reads", 1) {
				t.Errorf("stored dispatches %v, want %d for the guard and the peer's writes and reads", rows["stored dispatches"], n)
			}
			lines := strings.Split(strings.TrimSpace(text), "\n")
			last := lines[len(lines)-1]
			ratio, ok := strings.CutPrefix(last, "guard/peer = ")
			if !ok || !strings.HasPrefix(lines[len(lines)-2], "guard/floor = ") {
				t.Fatalf("the output does not end with guard/floor and guard/peer: %q", lines[len(lines)-2:])
			}
			if r, err := strconv.ParseFloat(ratio, 64); err != nil || r <= 0 {
				t.Errorf("guard/peer = %q", ratio)
			}
		})
	}
}

// TestRTTRun runs a short -rtt sweep on miniredis, two delays at two
// concurrencies, and checks that each run went through the proxy and
// completed, and that the closing table has a row per run with a
// guard/peer ratio. It makes no timing assertion.
func TestRTTRun(t *testing.T) {
	addr := "redis://" + miniredis.RunT(t).Addr() + "/0"
	var out strings.Builder
	if err := run([]string{"-redis", addr, "-c", "2,4", "-n", "120", "-rounds", "2", "-rtt", "0,200us"}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	if strings.Contains(text, "unexpected:") {
		t.Error("some dispatches failed")
	}
	if got := strings.Count(text, "results:     OK 120\n"); got != 4 {
		t.Errorf("%d runs of 120 OK, want 4", got)
	}
	if got := strings.Count(text, "Redis through a proxy that delays each direction by"); got != 4 {
		t.Errorf("%d runs through the proxy, want 4", got)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[len(lines)-5], "agents") {
		t.Fatalf("the output does not end with the table of runs: %q", lines[max(0, len(lines)-5):])
	}
	for i, want := range []string{"2 0s", "2 200µs", "4 0s", "4 200µs"} {
		f := strings.Fields(lines[len(lines)-4+i])
		if len(f) < 3 || f[0]+" "+f[1] != want {
			t.Fatalf("row %d = %q, want it to start %q", i, lines[len(lines)-4+i], want)
		}
		if r, err := strconv.ParseFloat(f[2], 64); err != nil || r <= 0 {
			t.Errorf("row %q: guard/peer %q", want, f[2])
		}
	}
}

// TestPostgresRun runs a short -store postgres://… -peer bench, with the
// Redis store beside on miniredis, direct and through a delaying proxy,
// and checks that what it prints adds up: each run's dispatches are
// counted once as a read, a write or a replay, none unexpected; the
// guard's round trips are 1 a read, 3 a fresh write (BEGIN with the
// reservation, the tool's insert, the commit with COMMIT) and 2 a replay,
// the peer's 4 a read and a replay and 5 a write, within the pool's own
// pings; each run wrote WAL; and the closing table has a row per run. It
// makes no timing assertion.
func TestPostgresRun(t *testing.T) {
	db := pgtest.NewDB(t)
	redisAddr := "redis://" + miniredis.RunT(t).Addr() + "/0"
	const n = 300
	var out strings.Builder
	if err := run([]string{"-store", db, "-peer", "-redis", redisAddr, "-c", "4", "-n", strconv.Itoa(n), "-rounds", "3", "-rtt", "0,100us"}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, block := range strings.Split(text, "== ")[1:] {
		rows := map[string][]string{}
		for _, line := range strings.Split(block, "\n") {
			f := strings.Fields(line)
			if len(f) > 3 {
				rows[strings.Join(f[:len(f)-3], " ")] = f[len(f)-3:]
			}
		}
		num := func(label string, col int) float64 {
			t.Helper()
			v, err := strconv.ParseFloat(rows[label][col], 64)
			if err != nil {
				t.Fatalf("row %q column %d: %v\n%s", label, col, err, block)
			}
			return v
		}
		for col, name := range []string{"guard", "peer", "redis"} {
			if num("reads", col)+num("writes", col)+num("replays", col) != n {
				t.Errorf("%s: the kinds do not add up to %d", name, n)
			}
			if num("unexpected", col) != 0 {
				t.Errorf("%s: %v unexpected results", name, rows["unexpected"])
			}
			// Every run writes (its bindings, keys or drafts): a run
			// that read no WAL of its own measured nothing.
			if num("WAL bytes per dispatch", col) <= 0 {
				t.Errorf("%s: %v WAL bytes per dispatch", name, rows["WAL bytes per dispatch"])
			}
		}
		trips := func(col int, read, write, replay float64) float64 {
			return (read*num("reads", col) + write*num("writes", col) + replay*num("replays", col)) / n
		}
		for col, want := range []float64{trips(0, 1, 3, 2), trips(1, 4, 5, 4)} {
			if got := num("round trips per dispatch", col); got < want || got > want*1.05 {
				t.Errorf("column %d: %.3f round trips a dispatch, want %.3f (and a few pings)", col, got, want)
			}
		}
	}
	if !strings.Contains(text, "guard/peer = ") || strings.Count(text, "each direction delayed by") != 2 {
		t.Errorf("the runs did not all run")
	}
}
