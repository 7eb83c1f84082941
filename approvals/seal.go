package approvals

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// A parked run's state (the conversation, the pending calls with the
// arguments the model wrote, secrets among them) is sealed before it is
// written to Redis, and opened when a worker resumes the run: Redis holds
// no part of it in clear.
//
// The sealing: a random 16-byte salt per state; the key
// HKDF-SHA256(Options.SecretKey, salt, sealInfo), 32 bytes; AES-256-GCM
// with a random 96-bit nonce; the tenant and run id as additional data, so
// that a state moved to another run's key (or another tenant's) does not
// open. Stored: sealPrefix, the salt, the nonce, the ciphertext and its
// tag. A fresh key per state keeps GCM's bound of 2^32 random nonces per
// key out of reach.

// sealInfo is HKDF's context string: the key it derives serves only this.
const sealInfo = "toolguard/approvals: parked run state, AES-256-GCM, v1"

// sealPrefix starts every sealed state.
const sealPrefix = "tgseal1:"

const saltSize = 16

// ErrSealed is returned (wrapped) for a parked run whose state does not
// open: sealed with another Options.SecretKey (the processes that park and
// resume runs must share it), altered, or not sealed.
var ErrSealed = errors.New("approvals: the parked run's state does not open with this queue's secret key")

// sealAAD binds a sealed state to its tenant and run.
func sealAAD(tenant, runID string) []byte {
	b := append([]byte(sealInfo), 0)
	b = binary.AppendUvarint(b, uint64(len(tenant)))
	b = append(b, tenant...)
	return append(b, runID...)
}

func (s *Queue) sealer(salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, s.secretKey, salt, sealInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// seal seals a run's state.
func (s *Queue) seal(tenant, runID string, state []byte) (string, error) {
	out := make([]byte, len(sealPrefix)+saltSize, len(sealPrefix)+saltSize+len(state)+28)
	copy(out, sealPrefix)
	salt := out[len(sealPrefix):]
	_, _ = rand.Read(salt)
	aead, err := s.sealer(salt)
	if err != nil {
		return "", err
	}
	return string(aead.Seal(out, nil, state, sealAAD(tenant, runID))), nil
}

// open opens a state seal sealed for the tenant's run.
func (s *Queue) open(tenant, runID, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok || len(rest) < saltSize {
		return nil, fmt.Errorf("run %s: %w (not sealed)", runID, ErrSealed)
	}
	aead, err := s.sealer([]byte(rest[:saltSize]))
	if err != nil {
		return nil, err
	}
	state, err := aead.Open(nil, nil, []byte(rest[saltSize:]), sealAAD(tenant, runID))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, ErrSealed)
	}
	return state, nil
}
