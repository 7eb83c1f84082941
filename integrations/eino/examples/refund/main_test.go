package main

import (
	"strings"
	"testing"
)

// The example's transcript: approved, the draft is made once and the
// model's repeat replays it; denied, nothing is drafted and the model is
// told why.
func TestRefund(t *testing.T) {
	for _, tc := range []struct {
		approve bool
		want    []string
	}{
		{true, []string{"shop: drafted DRAFT-1 for ORDER-7", `"delivery":"local_replay"`, "drafts created: 1"}},
		{false, []string{"A human declined this action (not a duplicate)", "drafts created: 0"}},
	} {
		var b strings.Builder
		out = &b
		if _, err := run(tc.approve); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("approve=%v: the transcript lacks %q:\n%s", tc.approve, w, b.String())
			}
		}
		if n := strings.Count(b.String(), "shop: drafted"); n > 1 {
			t.Errorf("approve=%v: %d drafts made", tc.approve, n)
		}
	}
}
