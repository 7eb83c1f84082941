package tgmcp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// question is what a request state says: one approval question put to
// the human of one principal about one exact call, and the operation the
// call runs as once answered. It is sealed (sealer) before it leaves the
// server, so the client can neither read nor change it, and any replica
// holding the Signer's key opens it.
type question struct {
	// ID names the question: the key its answer is stored under, and the
	// id of the grant a yes mints (so that the same answer sent again
	// pays for the same operation, never another).
	ID          string `json:"q"`
	TenantID    string `json:"t"`
	SubjectID   string `json:"s"`
	Tool        string `json:"n"`
	Fingerprint string `json:"f"`
	// The operation the answered call runs as (identity.go): the guard's
	// operation id and idempotency key of the call that was asked, and
	// the scope the client named, if any.
	OperationID    string `json:"o"`
	IdempotencyKey string `json:"k,omitempty"`
	Scope          string `json:"c,omitempty"`
	// Expires is when the question stops taking an answer (Unix ms).
	Expires int64 `json:"e"`
}

// expires returns when the question stops taking an answer.
func (q *question) expires() time.Time { return time.UnixMilli(q.Expires) }

// statePrefix starts every request state this server seals; the version
// is in it.
const statePrefix = "tgq1."

// maxStateBytes bounds the request state the server opens.
const maxStateBytes = 4096

// errBadState is the answer to a request state this server did not seal,
// that was changed, or that is for another principal: the client is told
// the state is not valid, never why.
var errBadState = errors.New("mcp: the request state is not one this server issued for this principal")

// sealer seals questions with AES-256-GCM under a key derived from the
// Signer's: replicas with the same Signer key open each other's states.
type sealer struct{ aead cipher.AEAD }

// keyLabel names the sealing key among keys derived from the Signer's.
const keyLabel = "toolguard/mcp: request state key, v1"

// newSealer derives the sealing key from the Signer's key: the MAC the
// Signer makes over a fixed grant that names the purpose (HMAC-SHA256 of a
// label under the host's key, the usual way to derive one key from
// another), hashed once more with the label. The derived key is never
// sent anywhere, and the grant it comes from is useless as an approval: it
// names no principal and expired at the zero time.
func newSealer(s *guard.Signer) (*sealer, error) {
	tok, err := s.Sign(guard.Grant{ID: keyLabel})
	if err != nil {
		return nil, err
	}
	mac := tok[strings.LastIndexByte(tok, '.')+1:]
	key := sha256.Sum256([]byte(keyLabel + "\x00" + mac))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal returns the request state of q: the prefix, then base64url of a
// random nonce and the sealed JSON of q.
func (s *sealer) seal(q *question) string {
	plain, _ := json.Marshal(q)
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	return statePrefix + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(statePrefix)))
}

// open returns the question of a request state this server sealed, or
// errBadState.
func (s *sealer) open(state string) (*question, error) {
	if len(state) > maxStateBytes || !strings.HasPrefix(state, statePrefix) {
		return nil, errBadState
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(state[len(statePrefix):])
	if err != nil || len(raw) < s.aead.NonceSize() {
		return nil, errBadState
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(statePrefix))
	if err != nil {
		return nil, errBadState
	}
	var q question
	if err := json.Unmarshal(plain, &q); err != nil || q.ID == "" {
		return nil, errBadState
	}
	return &q, nil
}

// forPrincipal opens a request state and checks that it was issued to p.
// A state of another principal is refused like a forged one.
func (s *sealer) forPrincipal(state string, p guard.Principal) (*question, error) {
	q, err := s.open(state)
	if err != nil {
		return nil, err
	}
	if q.TenantID != p.TenantID || q.SubjectID != p.SubjectID {
		return nil, errBadState
	}
	return q, nil
}
