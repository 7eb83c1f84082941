package redistest

import (
	"slices"
	"testing"
	"time"
)

func TestNeedBinariesSkipsWhenMissing(t *testing.T) {
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		NeedBinaries(t, "go", "no-such-program-redistest")
	})
	if !skipped {
		t.Fatal("NeedBinaries did not skip for a missing program")
	}
	t.Run("present", func(t *testing.T) {
		NeedBinaries(t, "go") // the test runs under go test: go is on PATH
		if t.Skipped() {
			t.Fatal("skipped with every program present")
		}
	})
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
