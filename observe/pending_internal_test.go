package observe

import (
	"testing"

	"github.com/toolguard/toolguard/guard"
)

func TestPendingSet(t *testing.T) {
	p := newPendingSet(3)
	k := func(op string) [32]byte { return opKey(guard.Principal{TenantID: "t", SubjectID: "s"}, op) }
	for _, op := range []string{"a", "b", "c"} {
		if !p.add(k(op), "tool-"+op) {
			t.Fatalf("add %s: already there", op)
		}
	}
	if p.add(k("a"), "x") {
		t.Fatal("a added twice")
	}
	// Removing and re-adding a makes it the newest.
	if tool, ok := p.remove(k("a")); !ok || tool != "tool-a" {
		t.Fatalf("remove a: %q %v", tool, ok)
	}
	if _, ok := p.remove(k("a")); ok {
		t.Fatal("a removed twice")
	}
	p.add(k("a"), "tool-a2")
	// Full: d evicts the oldest, b (not a, whose first insertion is stale).
	p.add(k("d"), "tool-d")
	if p.len() != 3 {
		t.Fatalf("len %d, want 3", p.len())
	}
	for op, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := p.m[k(op)]; ok != want {
			t.Errorf("%s in set: %v, want %v", op, ok, want)
		}
	}
	if tool, ok := p.get(k("a")); !ok || tool != "tool-a2" {
		t.Errorf("get a: %q %v", tool, ok)
	}
	// The order never grows past twice the capacity.
	for i := range 100 {
		p.add(k(string(rune('A'+i))), "")
		p.remove(k(string(rune('A' + i))))
	}
	if len(p.order) > 6 {
		t.Errorf("order holds %d entries, want at most 6", len(p.order))
	}
}

func TestOpKeyIsUnambiguous(t *testing.T) {
	a := opKey(guard.Principal{TenantID: "ab", SubjectID: "c"}, "op")
	b := opKey(guard.Principal{TenantID: "a", SubjectID: "bc"}, "op")
	if a == b {
		t.Fatal("ids that concatenate alike share a key")
	}
}

func TestClean(t *testing.T) {
	if got := clean("héllo", 2); got != "h" {
		t.Errorf("clean cut a rune: %q", got)
	}
	if got := clean("a\xffb", 10); got != "a\uFFFDb" {
		t.Errorf("clean kept invalid UTF-8: %q", got)
	}
}
