package approvals

import "encoding/base64"

var enc = base64.RawURLEncoding

// keys names a tenant's Redis keys. Every key of a tenant shares one hash
// tag, the base64url-encoded tenant id (as in package idem), so a script
// may touch them together on a Redis Cluster and no tenant id can move a
// key into another tenant's slot or name another tenant's key: ids are
// encoded, and request ids are made here.
type keys struct{ tag string }

func (s *Queue) keys(tenant string) keys {
	return keys{tag: s.prefix + "{a" + enc.EncodeToString([]byte(tenant)) + "}"}
}

func (k keys) req(id string) string    { return k.tag + ":req:" + id }
func (k keys) pending() string         { return k.tag + ":pending" }
func (k keys) audit() string           { return k.tag + ":audit" }
func (k keys) run(runID string) string { return k.tag + ":run:" + enc.EncodeToString([]byte(runID)) }
func (k keys) runs() string            { return k.tag + ":runs" }
func (k keys) ready() string           { return k.tag + ":ready" }
func (k keys) claims() string          { return k.tag + ":claims" }
func (k keys) denied(opID string) string {
	return k.tag + ":denied:" + enc.EncodeToString([]byte(opID))
}

// tenants names the set of tenants that have parked runs, which workers
// walk. It is the one key outside every tenant's slot.
func (s *Queue) tenants() string { return s.prefix + "{approvals}:tenants" }
