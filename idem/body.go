package idem

import (
	"encoding/hex"
	"strings"

	"github.com/toolguard/toolguard/guard"
)

// An audit body is stored in the tenant's stream in a compact form: the
// JSON the guard writes repeats the same field names in every record, and
// they are most of its bytes. Each of the fragments below is stored as one
// control byte, which a JSON text never holds raw (a string escapes every
// byte below 0x20, and the guard's canonical JSON has no whitespace), so
// the stored form decodes without ambiguity and the hash, which covers the
// body's own bytes, is unaffected. The first byte says which form follows:
//
//	0x01 the compact form
//	0x02 a body stored as it is that holds a control byte (not JSON, or
//	     not the guard's), which the compact form cannot carry
//
// Inside the compact form, 0x01 stands for the fingerprint fragment
// followed by 64 lowercase hex digits, and is followed by the 32 bytes they
// stand for (the guard's fingerprints are SHA-256s in hex).
//
// The fragments are part of the stored format: append new ones at the end
// of the list, never change or remove one.
var bodyFragments = []string{
	`{"contract":"` + guard.AuditContract + `","action":"dispatch","time":"`,
	`{"contract":"` + guard.AuditContract + `","action":"resolve","time":"`,
	`{"contract":"` + guard.AuditContract + `","action":`,
	`","principal":{"tenant_id":"`,
	`","subject_id":"`,
	`","roles":[]},"context":{"provider":"`,
	`","roles":[`,
	`]},"context":{"provider":"`,
	`","api_family":"`,
	`","response_id":"`,
	`","call_id":"`,
	`","operation_id":"`,
	`","idempotency_key":null,"adapter_revision":"`,
	`","idempotency_key":"`,
	`","adapter_revision":"`,
	`"},"tool":"`,
	`","fingerprint":"`,
	`","arguments":{`,
	`,"approval":null}`,
	`,"approval":{"grant_id":"`,
	`","approver":"`,
	`,"approval":null,"operator":`,
	`openai-responses-v1`,
	`responses`,
	`openai`,
	`anthropic`,
}

// bodyTokens are the bytes that stand for the fragments, in order: every
// control byte but the markers' and JSON's whitespace.
var bodyTokens = func() []byte {
	var t []byte
	for b := byte(0x03); b < 0x20; b++ {
		if b != '\t' && b != '\n' && b != '\r' {
			t = append(t, b)
		}
	}
	return t
}()

// The markers that start a stored body.
const (
	bodyCompact = "\x01"
	bodyRaw     = "\x02"
)

// fingerprintFragment is the fragment a binary fingerprint follows.
const fingerprintFragment = `","fingerprint":"`

var bodyEncoder, bodyDecoder = func() (*strings.Replacer, map[byte]string) {
	if len(bodyFragments) > len(bodyTokens) {
		panic("idem: more body fragments than tokens")
	}
	var enc []string
	dec := map[byte]string{}
	for i, f := range bodyFragments {
		enc = append(enc, f, string(bodyTokens[i]))
		dec[bodyTokens[i]] = f
	}
	return strings.NewReplacer(enc...), dec
}()

// encodeBody returns the stored form of an audit body.
func encodeBody(body []byte) string {
	for _, c := range body {
		if c < 0x20 {
			return bodyRaw + string(body)
		}
	}
	text := string(body)
	var b strings.Builder
	b.Grow(len(text)/2 + 64)
	b.WriteString(bodyCompact)
	// The fingerprint's fragment and hex digits become 0x01 and its bytes.
	if i := strings.Index(text, fingerprintFragment); i >= 0 {
		hexStart := i + len(fingerprintFragment)
		if end := hexStart + 64; end < len(text) && text[end] == '"' && isLowerHex(text[hexStart:end]) {
			_, _ = bodyEncoder.WriteString(&b, text[:i])
			b.WriteByte(0x01)
			b.WriteString(unhex(text[hexStart:end], 64))
			_, _ = bodyEncoder.WriteString(&b, text[end:])
			return b.String()
		}
	}
	_, _ = bodyEncoder.WriteString(&b, text)
	return b.String()
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeBody returns the audit body a stored form holds. It never fails: a
// stored form that was not written by encodeBody reads as some bytes, which
// the record's hash then refuses.
func decodeBody(stored string) []byte {
	if stored == "" {
		return nil
	}
	switch stored[0] {
	case bodyRaw[0]:
		return []byte(stored[1:])
	case bodyCompact[0]:
	default:
		return []byte(stored)
	}
	s := stored[1:]
	out := make([]byte, 0, 2*len(s)+128)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x01 && i+32 < len(s):
			out = append(out, fingerprintFragment...)
			out = hex.AppendEncode(out, []byte(s[i+1:i+33]))
			i += 32
		case c < 0x20 && bodyDecoder[c] != "":
			out = append(out, bodyDecoder[c]...)
		default:
			out = append(out, c)
		}
	}
	return out
}
