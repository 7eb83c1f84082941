package idem

import (
	"bytes"
	"strings"
	"testing"
)

// A body the guard writes is stored in under half its bytes and read back
// exactly; so is any other body, control bytes and all.
func TestBodyRoundTrip(t *testing.T) {
	read := `{"contract":"tool-audit-v2","action":"dispatch","time":"2026-12-01T00:27:22.93656427Z","principal":{"tenant_id":"bench-tenant-0","subject_id":"agent-2","roles":[]},"context":{"provider":"openai","api_family":"responses","response_id":"resp_bench","call_id":"call_4","operation_id":"call_4","idempotency_key":null,"adapter_revision":"openai-responses-v1"},"tool":"get_order","fingerprint":"0e22804020c2866d4a9eb1a0d588334aa0f0318716f1a435e9bbf6dded3c9d53","approval":null}`
	for _, body := range []string{read, "", "{}", "\x01\x05raw", "{\"a\":\"\x03\"}", "not json", strings.Repeat("\x1f", 3)} {
		stored := encodeBody([]byte(body))
		if got := decodeBody(stored); !bytes.Equal(got, []byte(body)) && body != "" {
			t.Errorf("%q: stored %q, read back %q", body, stored, got)
		}
	}
	if n := len(encodeBody([]byte(read))); n*2 > len(read) {
		t.Errorf("a read's body of %d bytes is stored in %d", len(read), n)
	}
}

func FuzzBody(f *testing.F) {
	f.Add([]byte(`{"contract":"tool-audit-v2","action":"dispatch","time":"x","principal":{"tenant_id":"t","subject_id":"s","roles":["a"]}}`))
	f.Add([]byte("\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if got := decodeBody(encodeBody(body)); len(body) > 0 && !bytes.Equal(got, body) {
			t.Fatalf("%q read back as %q", body, got)
		}
		_ = decodeBody(string(body)) // any stored bytes decode without a panic
	})
}
