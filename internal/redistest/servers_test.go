package redistest

import (
	"slices"
	"testing"
	"time"
)

// TestMissingBinaries: what NeedBinaries skips for is what is not on PATH
// (tested without skipping, so a full run counts no skip for it).
func TestMissingBinaries(t *testing.T) {
	if got := missingBinaries([]string{"go", "no-such-program-redistest"}); len(got) != 1 || got[0] != "no-such-program-redistest" {
		t.Fatalf("missing = %v, want only no-such-program-redistest", got)
	}
	if got := missingBinaries([]string{"go"}); len(got) != 0 {
		t.Fatalf("missing = %v with go on PATH (the test runs under go test)", got)
	}
}

func TestWaitUntil(t *testing.T) {
	n := 0
	if !WaitUntil(5*time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("WaitUntil stopped after %d calls, want true on the 3rd", n)
	}
	if WaitUntil(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("WaitUntil reported true for a condition that never held")
	}
}

func TestClusterCommandLines(t *testing.T) {
	got := createArgs(1, []string{"127.0.0.1:1", "127.0.0.1:2"})
	want := []string{"--cluster", "create", "127.0.0.1:1", "127.0.0.1:2", "--cluster-replicas", "1", "--cluster-yes"}
	if !slices.Equal(got, want) {
		t.Fatalf("create: %q, want %q", got, want)
	}
	got = reshardArgs("127.0.0.1:1", "a", "b", 1000)
	want = []string{"--cluster", "reshard", "127.0.0.1:1", "--cluster-from", "a", "--cluster-to", "b",
		"--cluster-slots", "1000", "--cluster-yes"}
	if !slices.Equal(got, want) {
		t.Fatalf("reshard: %q, want %q", got, want)
	}
}
