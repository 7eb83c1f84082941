package tgmcp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
)

func testSealer(t testing.TB, key byte) *sealer {
	t.Helper()
	signer, err := guard.NewSigner(bytes.Repeat([]byte{key}, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSealer(signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testQuestion = question{ID: "q1", TenantID: "tenant-a", SubjectID: "user-1", Tool: "create_refund_draft",
	Fingerprint: "f00d", OperationID: "op-1", IdempotencyKey: "k-1", Scope: "s", Expires: 1700000000000}

// A request state opens on any sealer with the same Signer key, to the
// question sealed; a change of any one character of it, another key, or
// another principal is refused as errBadState; two seals of one question
// differ (a fresh nonce), and neither shows the question in clear.
func TestRequestStateSealing(t *testing.T) {
	a, b, other := testSealer(t, 1), testSealer(t, 1), testSealer(t, 2)
	state := a.seal(&testQuestion)
	q, err := b.open(state)
	if err != nil || *q != testQuestion {
		t.Fatalf("open: %+v %v", q, err)
	}
	if again := a.seal(&testQuestion); again == state {
		t.Fatal("two seals of one question are equal")
	}
	for _, clear := range []string{"tenant-a", "user-1", "op-1", "create_refund_draft"} {
		if strings.Contains(state, clear) {
			t.Fatalf("the state shows %q", clear)
		}
	}
	if _, err := other.open(state); err != errBadState {
		t.Fatalf("another key: %v", err)
	}
	for i := range len(state) {
		for _, c := range []byte{'A', '_', '.', 'z'} {
			if state[i] == c {
				continue
			}
			changed := state[:i] + string(c) + state[i+1:]
			if q, err := b.open(changed); err != errBadState {
				t.Fatalf("state changed at %d opened: %+v %v", i, q, err)
			}
		}
	}
	if _, err := b.forPrincipal(state, guard.Principal{TenantID: "tenant-b", SubjectID: "user-1"}); err != errBadState {
		t.Fatalf("another principal: %v", err)
	}
	if _, err := b.forPrincipal(state, guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}); err != nil {
		t.Fatalf("its principal: %v", err)
	}
}

// FuzzOpenState opens arbitrary request states: nothing panics, and only
// states the sealer made open (its key has sealed testQuestion alone; each
// fuzzing process seals its own, with a nonce of its own).
func FuzzOpenState(f *testing.F) {
	s := testSealer(f, 1)
	good := s.seal(&testQuestion)
	for _, seed := range []string{good, good[:len(good)-1], statePrefix, statePrefix + "!!!", "", "tg1.abc.def", strings.Repeat("A", maxStateBytes+1)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, state string) {
		q, err := s.open(state)
		if err == nil && *q != testQuestion {
			t.Fatalf("%q opened to %+v", state, q)
		}
	})
}
