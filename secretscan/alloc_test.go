package secretscan_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// TestFindAllocs: Find allocates nothing on the strings of an output that
// holds no secret (support tickets full of "key", "token" and "password",
// ids, UUIDs, SHAs, URLs), and nothing on its whole JSON text.
func TestFindAllocs(t *testing.T) {
	d := newDetector(t, secretscan.Options{})
	raw := ticketsJSON(4096)
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	values := append(strs(tree, nil), string(raw))
	d.Find(values[0]) // the pools
	for _, v := range values {
		if n := testing.AllocsPerRun(20, func() { d.Find(v) }); n != 0 {
			t.Errorf("Find(%.80q) allocates %v times", v, n)
		}
	}
}
