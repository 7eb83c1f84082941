package refunddemo

import "testing"

func TestWantDrafts(t *testing.T) {
	for _, c := range []struct {
		approve bool
		drafts  int
		ok      bool
	}{{true, 1, true}, {true, 0, false}, {true, 2, false}, {false, 0, true}, {false, 1, false}} {
		if err := WantDrafts(c.approve, c.drafts); (err == nil) != c.ok {
			t.Errorf("WantDrafts(%v, %d) = %v, want ok %v", c.approve, c.drafts, err, c.ok)
		}
	}
}
