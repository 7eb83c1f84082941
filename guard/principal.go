package guard

import (
	"errors"
	"unicode/utf8"
)

// MaxIDBytes bounds tenant, subject, call, operation and idempotency ids.
const MaxIDBytes = 512

// Principal is who the agent acts for. It comes from the host application
// (its session, its token), never from the model's arguments.
type Principal struct {
	TenantID  string
	SubjectID string
	Roles     []string
}

// HasRole reports whether p has the role.
func (p Principal) HasRole(role string) bool {
	for _, r := range p.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// ErrBadPrincipal is returned to the host for a principal without a tenant
// or subject, or with ids that are not valid UTF-8 or too long.
var ErrBadPrincipal = errors.New("guard: principal needs a tenant id and a subject id of valid UTF-8, at most 512 bytes each")

// Validate checks that the principal can scope stored records.
func (p Principal) Validate() error {
	if !validID(p.TenantID) || !validID(p.SubjectID) {
		return ErrBadPrincipal
	}
	return nil
}

func validID(s string) bool {
	return s != "" && len(s) <= MaxIDBytes && utf8.ValidString(s)
}
