package idem

import "encoding/base64"

// keys names the Redis keys of one principal's call, operation and
// idempotency key. Every id is base64url-encoded, so no id can contain the
// braces that delimit the hash tag or the colons that separate the parts:
// hostile ids cannot move a key to another tenant's slot or name another
// tenant's key. The tag is the encoded tenant id, so all keys of a tenant
// share a cluster slot and one script may touch them together.
type keys struct {
	call, idem, op, audit, head string
	opCall                      string // the binding of the call whose id is the operation id
}

var enc = base64.RawURLEncoding

// makeKeys names the six keys of a call. They are written into one buffer
// and sliced from one string: a dispatch allocates once for its key names.
func makeKeys(prefix, tenant, subject, callID, idemKey, opID string) keys {
	tagLen := len(prefix) + 3 + enc.EncodedLen(len(tenant))
	subLen := enc.EncodedLen(len(subject))
	scopedLen := func(id string) int { return tagLen + 4 + subLen + enc.EncodedLen(len(id)) }
	b := make([]byte, 0, scopedLen(callID)+scopedLen(idemKey)+2*scopedLen(opID)+2*tagLen+len(":audit")+len(":audit:head"))
	tag := func() {
		b = append(b, prefix...)
		b = append(b, "{t"...) // never an empty tag, which Redis would ignore
		b = enc.AppendEncode(b, []byte(tenant))
		b = append(b, '}')
	}
	var ends [6]int
	for i, id := range [4]string{callID, idemKey, opID, opID} {
		tag()
		b = append(b, ':', "ckoc"[i], ':')
		b = enc.AppendEncode(b, []byte(subject))
		b = append(b, ':')
		b = enc.AppendEncode(b, []byte(id))
		ends[i] = len(b)
	}
	tag()
	b = append(b, ":audit"...)
	ends[4] = len(b)
	tag()
	b = append(b, ":audit:head"...)
	ends[5] = len(b)
	all := string(b)
	return keys{call: all[:ends[0]], idem: all[ends[0]:ends[1]], op: all[ends[1]:ends[2]],
		opCall: all[ends[2]:ends[3]], audit: all[ends[3]:ends[4]], head: all[ends[4]:ends[5]]}
}

// list returns the keys in the scripts' order (K in lua/prelude.lua). When
// the operation index and the operation's call binding are the call's
// binding (args), it names each key once, four in all, and the prelude
// fills the rest in: Redis makes each key of a call a Lua string too.
func (k keys) list() []string {
	if k.op == k.call && k.opCall == k.call {
		return []string{k.call, k.idem, k.audit, k.head}
	}
	return []string{k.call, k.idem, k.op, k.audit, k.head, k.opCall}
}

// grantKey names the marker of a spent approval grant: the record key of
// the operation it paid for, in the tenant's slot like the call's keys.
func grantKey(prefix, tenant, subject, grantID string) string {
	return prefix + "{t" + enc.EncodeToString([]byte(tenant)) + "}:g:" + enc.EncodeToString([]byte(subject)) + ":" +
		enc.EncodeToString([]byte(grantID))
}
