package idem

import (
	"regexp"
	"strings"
	"testing"
)

// TestLibraryText: the library is named toolguard_<12 hex digits>, its
// text starts with that name and registers every script as
// <library>_<script>; the name follows the text, so a changed body (a new
// version of the store) loads under a name of its own, and the same text
// always gets the same name (every process of one version shares one
// library).
func TestLibraryText(t *testing.T) {
	if !regexp.MustCompile(`^toolguard_[0-9a-f]{12}$`).MatchString(lib.name) {
		t.Fatalf("library name %q", lib.name)
	}
	if !strings.HasPrefix(lib.code, "#!lua name="+lib.name+"\n") {
		t.Fatalf("library text starts %q", lib.code[:min(60, len(lib.code))])
	}
	for _, sc := range allScripts {
		fn := lib.name + "_" + sc.name
		if lib.fn(sc) != fn || !strings.Contains(lib.code, "redis.register_function('"+fn+"',") {
			t.Errorf("script %s: function %q, want %q registered", sc.name, lib.fn(sc), fn)
		}
	}
	if again := newLibrary(prelude, allScripts); again.name != lib.name || again.code != lib.code {
		t.Fatalf("the same scripts gave library %s, then %s", lib.name, again.name)
	}

	changed := make([]*script, len(allScripts))
	copy(changed, allScripts)
	changed[0] = newScript(allScripts[0].name, allScripts[0].body+"\n-- the next version")
	next := newLibrary(prelude, changed)
	if next.name == lib.name || next.fn(changed[0]) == lib.fn(allScripts[0]) {
		t.Fatalf("a changed body kept the library name %s", next.name)
	}
	if other := newLibrary(prelude+"\n-- the next version", allScripts); other.name == lib.name {
		t.Fatalf("a changed prelude kept the library name %s", other.name)
	}
}
