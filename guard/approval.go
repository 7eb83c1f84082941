package guard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"strings"
	"sync"
	"time"
)

// Grant is a human's approval of one exact intent: this tool with these
// arguments (by fingerprint), for this tenant and subject, until ExpiresAt.
// The host mints it after the human said yes, signs it with Signer.Sign and
// passes the token with the call.
type Grant struct {
	ID          string    `json:"id"`
	TenantID    string    `json:"tenant_id"`
	SubjectID   string    `json:"subject_id"`
	Tool        string    `json:"tool"`
	Fingerprint string    `json:"fingerprint"`
	Approver    string    `json:"approver"`
	IssuedAt    time.Time `json:"issued_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// DeclinedMessage is the message of the APPROVAL_REQUIRED result a call
// gets when a human said no, on every entry point (the agent loop, MCP,
// the framework integrations): worded so that the model stops, and tells
// the user.
const DeclinedMessage = "A human declined this action. Do not retry it or ask again; tell the user it was not approved."

// Declined returns the model result of a human's no. message, when not "",
// is what the approver chose to tell the model (never an internal note),
// quoted in the result's message.
func Declined(message string) *Result {
	msg := DeclinedMessage
	if message != "" {
		msg = "A human declined this action (" + message + "). Do not retry it or ask again; tell the user it was not approved."
	}
	return &Result{Code: CodeApprovalRequired, Delivery: DeliveryFresh, Message: msg}
}

// ExpiredMessage is the message of the APPROVAL_REQUIRED result a call
// gets when the human it waited for did not decide in time, on every entry
// point that waits for a human: nobody said no, so the model may ask
// again later, unlike after DeclinedMessage.
const ExpiredMessage = "Nobody decided on this action in time, so it did not run. It was not declined: tell the user it is still waiting for approval; you may ask again later."

// Expired returns the model result of an approval that nobody decided
// before its deadline.
func Expired() *Result {
	return &Result{Code: CodeApprovalRequired, Delivery: DeliveryFresh, Message: ExpiredMessage}
}

// GrantUsedMessage is the message of the APPROVAL_INVALID result a write
// gets when its grant already paid for another operation's execution.
const GrantUsedMessage = "The approval was already used for another execution: one approval pays for one execution. Ask a human to approve this call."

// GrantSkew is how long after its expiry a spent grant is still known to be
// spent: the margin for clocks of guards that disagree by up to that much.
const GrantSkew = time.Minute

// NewGrant returns a grant for exactly this principal and proposal, approved
// by approver at now and valid for ttl, with a random id.
func NewGrant(p Principal, prop Proposal, approver string, now time.Time, ttl time.Duration) Grant {
	var id [12]byte
	_, _ = rand.Read(id[:])
	return Grant{
		ID:          "grant_" + hex.EncodeToString(id[:]),
		TenantID:    p.TenantID,
		SubjectID:   p.SubjectID,
		Tool:        prop.Name,
		Fingerprint: Fingerprint(prop.Name, prop.Arguments),
		Approver:    approver,
		IssuedAt:    now.UTC(),
		ExpiresAt:   now.Add(ttl).UTC(),
	}
}

// Signer signs and verifies approval grants with HMAC-SHA256 and a key of
// the host's. Tokens are "tg1." + base64url(grant JSON) + "." +
// base64url(MAC); the MAC covers the version prefix and the payload.
type Signer struct {
	key  []byte
	macs sync.Pool // of hash.Hash: HMAC instances, reset between uses

	mu       sync.Mutex
	verified map[string]*Grant // tokens already verified: same token, same grant (shared, read-only)
}

// maxVerified bounds the cache of verified tokens; it is cleared when full.
const maxVerified = 4096

// ErrShortKey is returned by NewSigner for keys under 32 bytes.
var ErrShortKey = errors.New("guard: approval key must be at least 32 bytes")

// NewSigner returns a signer with the key, which must be at least 32 bytes
// of secret randomness.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, ErrShortKey
	}
	s := &Signer{key: append([]byte(nil), key...), verified: map[string]*Grant{}}
	s.macs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s, nil
}

const grantPrefix = "tg1."

// Sign returns the signed token of g.
func (s *Signer) Sign(g Grant) (string, error) {
	payload, err := json.Marshal(g)
	if err != nil {
		return "", err
	}
	body := grantPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body)), nil
}

func (s *Signer) mac(body string) []byte {
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(body))
	sum := m.Sum(nil)
	s.macs.Put(m)
	return sum
}

// ErrBadGrant is returned by Verify for a token that is malformed or whose
// signature does not match.
var ErrBadGrant = errors.New("guard: approval token is malformed or its signature does not match")

// Verify checks the token's signature and returns its grant. It does not
// check what the grant is bound to; Check does.
func (s *Signer) Verify(token string) (Grant, error) {
	g, err := s.verified1(token)
	if err != nil {
		return Grant{}, err
	}
	return *g, nil
}

// verified1 returns the shared, read-only grant of a verified token.
func (s *Signer) verified1(token string) (*Grant, error) {
	s.mu.Lock()
	g, ok := s.verified[token]
	s.mu.Unlock()
	if ok {
		return g, nil
	}
	v, err := s.verify(token)
	if err != nil {
		return nil, err
	}
	g = &v
	s.mu.Lock()
	if len(s.verified) >= maxVerified {
		clear(s.verified)
	}
	s.verified[token] = g
	s.mu.Unlock()
	return g, nil
}

func (s *Signer) verify(token string) (Grant, error) {
	if len(token) > 4096 || !strings.HasPrefix(token, grantPrefix) {
		return Grant{}, ErrBadGrant
	}
	i := strings.LastIndexByte(token, '.')
	body, sig := token[:i], token[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(body)) {
		return Grant{}, ErrBadGrant
	}
	payload, err := base64.RawURLEncoding.DecodeString(body[len(grantPrefix):])
	if err != nil {
		return Grant{}, ErrBadGrant
	}
	var g Grant
	if err := json.Unmarshal(payload, &g); err != nil {
		return Grant{}, ErrBadGrant
	}
	return g, nil
}

// Check verifies the token and that its grant has an id and is bound to
// exactly this principal and proposal (its tool, and the fingerprint of
// its arguments, as NewGrant binds them) and has not expired at now (a
// grant is valid strictly before ExpiresAt). Whether the grant was spent
// already is the store's to say (Entry.GrantID).
func (s *Signer) Check(token string, p Principal, prop Proposal, now time.Time) (Grant, error) {
	g, err := s.check(token, p, prop.Name, Fingerprint(prop.Name, prop.Arguments), now)
	if err != nil {
		return Grant{}, err
	}
	return *g, nil
}

func (s *Signer) check(token string, p Principal, tool, fingerprint string, now time.Time) (*Grant, error) {
	g, err := s.verified1(token)
	if err != nil {
		return nil, err
	}
	switch {
	case g.ID == "":
		return nil, errors.New("guard: approval grant has no id, so it could be spent more than once")
	case g.TenantID != p.TenantID || g.SubjectID != p.SubjectID:
		return nil, errors.New("guard: approval granted to another principal")
	case g.Tool != tool || g.Fingerprint != fingerprint:
		return nil, errors.New("guard: approval granted for another intent")
	case !now.Before(g.ExpiresAt):
		return nil, errors.New("guard: approval expired")
	}
	return g, nil
}
