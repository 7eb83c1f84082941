package secretscan_test

import (
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// TestFindAllocs: Find allocates nothing on the strings of an output that
// holds no secret (support tickets full of "key", "token" and "password",
// ids, UUIDs, SHAs, URLs), and nothing on its whole JSON text.
func TestFindAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it holds")
	}
	d := newDetector(t, secretscan.Options{})
	raw := ticketsJSON(4096)
	values := append(jsonStrings(t, raw), string(raw))
	d.Find(values[0]) // the pools
	for _, v := range values {
		if n := testing.AllocsPerRun(20, func() { d.Find(v) }); n != 0 {
			t.Errorf("Find(%.80q) allocates %v times", v, n)
		}
	}
}
