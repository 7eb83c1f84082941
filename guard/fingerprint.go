package guard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/toolguard/toolguard/internal/canon"
)

// Fingerprint returns the hex SHA-256 of the canonical JSON of
// {"arguments": arguments, "name": name}: keys sorted, no insignificant white
// space, numbers in shortest form (RFC 8785, see package internal/canon), so
// the same intent always has the same fingerprint however the model spaced
// or ordered it. Arguments that are not JSON (or are rejected by the strict
// parser) are fingerprinted as a JSON string holding their raw text, so that
// a call id can still be bound to them.
func Fingerprint(name string, arguments []byte) string {
	c, _, err := canon.Parse(arguments, canon.Limits{MaxBytes: len(arguments) + 1})
	return fingerprint(name, arguments, c, err)
}

func fingerprint(name string, raw, canonical []byte, parseErr error) string {
	h := sha256.New()
	buf := make([]byte, 0, 32+len(name)+len(canonical))
	buf = append(buf, `{"arguments":`...)
	if parseErr != nil {
		// Invalid UTF-8 in raw text is replaced, as JSON cannot hold it;
		// the hash of the raw bytes keeps distinct inputs distinct.
		sum := sha256.Sum256(raw)
		buf = canon.AppendString(buf, "invalid-json:"+hex.EncodeToString(sum[:]))
	} else {
		buf = append(buf, canonical...)
	}
	buf = append(buf, `,"name":`...)
	buf = canon.AppendString(buf, name)
	buf = append(buf, '}')
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// downstreamKey derives the idempotency key handed to downstream systems:
// "tg1_" and the URL-safe base64 of SHA-256(tenant, subject, key), each
// length-prefixed so that no choice of ids can make two scopes meet.
func downstreamKey(p Principal, key string) string {
	h := sha256.New()
	for _, s := range []string{p.TenantID, p.SubjectID, key} {
		var n [4]byte
		l := len(s)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "tg1_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
