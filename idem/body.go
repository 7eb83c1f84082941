package idem

import "strings"

// An audit body is stored in the tenant's stream in a compact form: the
// JSON the guard writes repeats the same field names in every record, and
// they are most of its bytes. Each of the fragments below is stored as one
// control byte, which a JSON text never holds raw (a string escapes every
// byte below 0x20, and the guard's canonical JSON has no whitespace), so
// the stored form decodes without ambiguity and the hash, which covers the
// body's own bytes, is unaffected. The first byte says which form follows:
//
//	'{'  a body stored as it is (records of earlier versions)
//	0x01 the compact form
//	0x02 a body stored as it is that holds a control byte (not JSON, or
//	     not the guard's), which the compact form cannot carry
//
// The fragments are part of the stored format: append new ones at the end
// of the list, never change or remove one.
var bodyFragments = []string{
	`{"contract":"tool-audit-v2","action":"dispatch","time":"`,
	`{"contract":"tool-audit-v2","action":"resolve","time":"`,
	`{"contract":"tool-audit-v2","action":`,
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

var bodyEncoder, bodyDecoder = func() (*strings.Replacer, *strings.Replacer) {
	if len(bodyFragments) > len(bodyTokens) {
		panic("idem: more body fragments than tokens")
	}
	var enc, dec []string
	for i, f := range bodyFragments {
		enc = append(enc, f, string(bodyTokens[i]))
		dec = append(dec, string(bodyTokens[i]), f)
	}
	return strings.NewReplacer(enc...), strings.NewReplacer(dec...)
}()

// encodeBody returns the stored form of an audit body.
func encodeBody(body []byte) string {
	for _, c := range body {
		if c < 0x20 {
			return bodyRaw + string(body)
		}
	}
	return bodyCompact + bodyEncoder.Replace(string(body))
}

// decodeBody returns the audit body a stored form holds.
func decodeBody(stored string) []byte {
	if stored == "" {
		return nil
	}
	switch stored[0] {
	case bodyCompact[0]:
		return []byte(bodyDecoder.Replace(stored[1:]))
	case bodyRaw[0]:
		return []byte(stored[1:])
	}
	return []byte(stored)
}
