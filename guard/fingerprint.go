package guard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"sync"

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

// bufs pools the scratch buffers of fingerprints and derived keys.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func fingerprint(name string, raw, canonical []byte, parseErr error) string {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := (*bp)[:0]
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
	*bp = buf
	sum := sha256.Sum256(buf)
	var out [64]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// downstreamKey derives the idempotency key handed to downstream systems:
// "tg1_" and the URL-safe base64 of SHA-256(tenant, subject, key), each
// length-prefixed so that no choice of ids can make two scopes meet.
func downstreamKey(p Principal, key string) string {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := (*bp)[:0]
	for _, s := range [3]string{p.TenantID, p.SubjectID, key} {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	*bp = buf
	sum := sha256.Sum256(buf)
	var out [4 + 43]byte
	copy(out[:], "tg1_")
	base64.RawURLEncoding.Encode(out[4:], sum[:])
	return string(out[:])
}
