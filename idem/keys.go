package idem

import (
	"encoding/base64"
	"strings"
)

// keys names the Redis keys of one principal's call, operation and
// idempotency key. Every id is base64url-encoded, so no id can contain the
// braces that delimit the hash tag or the colons that separate the parts:
// hostile ids cannot move a key to another tenant's slot or name another
// tenant's key. The tag is the encoded tenant id, so all keys of a tenant
// share a cluster slot and one script may touch them together.
type keys struct {
	call, idem, op, audit, head string
}

var enc = base64.RawURLEncoding

func tenantTag(prefix, tenant string) string {
	var b strings.Builder
	b.Grow(len(prefix) + enc.EncodedLen(len(tenant)) + 3)
	b.WriteString(prefix)
	b.WriteString("{t") // never an empty tag, which Redis would ignore
	b.WriteString(enc.EncodeToString([]byte(tenant)))
	b.WriteByte('}')
	return b.String()
}

func scoped(tag, kind, subject, id string) string {
	return tag + ":" + kind + ":" + enc.EncodeToString([]byte(subject)) + ":" + enc.EncodeToString([]byte(id))
}

func makeKeys(prefix, tenant, subject, callID, idemKey, opID string) keys {
	tag := tenantTag(prefix, tenant)
	return keys{
		call:  scoped(tag, "c", subject, callID),
		idem:  scoped(tag, "k", subject, idemKey),
		op:    scoped(tag, "o", subject, opID),
		audit: tag + ":audit",
		head:  tag + ":audit:head",
	}
}

func (k keys) list() []string { return []string{k.call, k.idem, k.op, k.audit, k.head} }
