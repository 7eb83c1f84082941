package idem

import (
	"strings"
	"testing"
)

// hashTag returns the part of a key Redis Cluster hashes: the text between
// the first '{' and the first '}' after it, when not empty; else the key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func checkKeys(t *testing.T, prefix, tenant, subject, call, key, op string) keys {
	t.Helper()
	k := makeKeys(prefix, tenant, subject, call, key, op)
	tag := hashTag(k.call)
	for _, name := range k.list() {
		if got := hashTag(name); got != tag || got == "" {
			t.Fatalf("key %q hashes on %q, the call key on %q: a script would cross slots", name, got, tag)
		}
		if strings.ContainsAny(name[len(prefix):], "\n\r") {
			t.Fatalf("key %q carries raw control characters from an id", name)
		}
	}
	return k
}

// FuzzKeys: whatever the ids, all keys of a call share one hash tag, and
// two different (tenant, subject, id) triples never share a key.
func FuzzKeys(f *testing.F) {
	f.Add("tenant-a", "user-1", "call-1", "tenant-b", "user-1", "call-1")
	f.Add("t{a}", "s", "c", "t", "{a}s", "c")
	f.Add("t:a", "b", "c", "t", "a:b", "c")
	f.Add("}{", "::", "\n", "}", "{::", "\n")
	f.Add("tg:{t}:c", "x", "y", "tg:", "{t}:c:x", "y")
	f.Fuzz(func(t *testing.T, t1, s1, c1, t2, s2, c2 string) {
		a := checkKeys(t, "tg:", t1, s1, c1, c1, c1)
		b := checkKeys(t, "tg:", t2, s2, c2, c2, c2)
		same := t1 == t2 && s1 == s2 && c1 == c2
		for _, pair := range [][2]string{{a.call, b.call}, {a.idem, b.idem}, {a.op, b.op}} {
			if (pair[0] == pair[1]) != same {
				t.Fatalf("(%q,%q,%q) and (%q,%q,%q): keys %q and %q", t1, s1, c1, t2, s2, c2, pair[0], pair[1])
			}
		}
		if (a.audit == b.audit) != (t1 == t2) {
			t.Fatalf("tenants %q and %q: audit streams %q and %q", t1, t2, a.audit, b.audit)
		}
	})
}

// TestKeyNames pins the documented layout (docs/operations.md): keys written
// by one version must be found by the next.
func TestKeyNames(t *testing.T) {
	k := makeKeys("tg:", "tenant-a", "user-1", "call_1", "k:refund-1", "op-1")
	want := keys{
		call:   "tg:{tdGVuYW50LWE}:c:dXNlci0x:Y2FsbF8x",
		idem:   "tg:{tdGVuYW50LWE}:k:dXNlci0x:azpyZWZ1bmQtMQ",
		op:     "tg:{tdGVuYW50LWE}:o:dXNlci0x:b3AtMQ",
		audit:  "tg:{tdGVuYW50LWE}:audit",
		head:   "tg:{tdGVuYW50LWE}:audit:head",
		opCall: "tg:{tdGVuYW50LWE}:c:dXNlci0x:b3AtMQ", // the binding a call named op-1 would have
	}
	if k != want {
		t.Fatalf("keys\n got %+v\nwant %+v", k, want)
	}
	s, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if stream, head := s.AuditKeys("tenant-a"); stream != want.audit || head != want.head {
		t.Fatalf("AuditKeys: %q %q", stream, head)
	}
	empty := makeKeys("p:", "", "", "", "", "")
	if empty.call != "p:{t}:c::" || empty.head != "p:{t}:audit:head" {
		t.Fatalf("empty ids: %+v", empty)
	}
}
