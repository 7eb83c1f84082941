package idem

import (
	"context"
	"encoding/binary"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// Idempotency records and call bindings are Redis strings: their fields in
// a fixed order, packed as MessagePack strings (packFields), as
// lua/prelude.lua writes them (encode, decode). One SET stores a record
// with its TTL, and a record costs a string: a Redis hash holding a value
// over 64 bytes (a tool's output) is a hashtable several times its size.

// The fields of a record and of a binding, in stored order.
var (
	recordNames  = []string{"fp", "state", "data", "msg", "op", "lease", "token", "tool", "key", "call", "done"}
	bindingNames = []string{"fp", "code", "data", "msg", "key", "done"}
)

// packFields packs the fields as MessagePack strings: each a header (0xa0
// + length up to 31, else 0xd9, 0xda or 0xdb and the length in 1, 2 or 4
// bytes, big-endian) and its bytes. The scripts read them with cmsgpack,
// the C library Redis gives scripts (or the prelude's Lua, on a server
// without it).
func packFields(fields ...string) []byte {
	n := 0
	for _, f := range fields {
		n += len(f) + 5
	}
	return appendFields(make([]byte, 0, n), fields...)
}

// appendFields appends the fields to b, packed as packFields packs them.
func appendFields(b []byte, fields ...string) []byte {
	for _, f := range fields {
		switch n := len(f); {
		case n < 32:
			b = append(b, 0xa0|byte(n))
		case n < 1<<8:
			b = append(b, 0xd9, byte(n))
		case n < 1<<16:
			b = append(b, 0xda, byte(n>>8), byte(n))
		default:
			b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		b = append(b, f...)
	}
	return b
}

// appendInt appends v as a MessagePack integer of 8 bytes, big-endian:
// 0xcf (uint64) when v >= 0, else 0xd3 (int64, two's complement).
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(v))
}

// decodeFields reads a stored record or binding: its fields, "" where one is
// empty. It stops at the first malformed field.
func decodeFields(s string) []string {
	var out []string
	for len(s) > 0 {
		var n, h int
		switch c := s[0]; {
		case c >= 0xa0 && c <= 0xbf:
			n, h = int(c&0x1f), 1
		case c == 0xd9 && len(s) >= 2:
			n, h = int(s[1]), 2
		case c == 0xda && len(s) >= 3:
			n, h = int(s[1])<<8|int(s[2]), 3
		case c == 0xdb && len(s) >= 5:
			n, h = int(s[1])<<24|int(s[2])<<16|int(s[3])<<8|int(s[4]), 5
		default:
			return out
		}
		if n > len(s)-h {
			return out
		}
		out = append(out, s[h:h+n])
		s = s[h+n:]
	}
	return out
}

// readFields reads the records or bindings at keys as maps of their named
// fields, nil for a key that does not exist, in one pipeline.
func readFields(ctx context.Context, rdb redis.Cmdable, keys []string, names []string) ([]map[string]string, error) {
	vals := make([]*redis.StringCmd, len(keys))
	// Pipelined's error is the first command's that failed; each command's
	// own is read below, where redis.Nil (no such key) is no error.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			vals[i] = p.Get(ctx, k)
		}
		return nil
	})
	out := make([]map[string]string, len(keys))
	for i := range keys {
		v, err := vals[i].Result()
		switch {
		case err == redis.Nil:
		case err != nil:
			return nil, err
		default:
			out[i] = namedFields(decodeFields(v), names)
		}
	}
	return out, nil
}

func namedFields(fields, names []string) map[string]string {
	m := make(map[string]string, len(names))
	for i, name := range names {
		if i < len(fields) {
			m[name] = fields[i]
		}
	}
	return m
}

// A fingerprint (the guard's is the hex SHA-256 of the intent) is stored as
// the 32 bytes its 64 lowercase hex digits stand for, half the bytes in
// every record and binding; any other fingerprint is stored as it is.
func storedFP(fp string) string { return unhex(fp, 64) }

// A reservation token (the guard's is 16 random bytes in hex) is stored as
// its bytes too. Tokens are only ever compared, and read back only to be
// sent again (Resolve), so a stored token is never shown.
func storedToken(t string) string { return unhex(t, 32) }

// unhex returns the bytes s stands for when it is n lowercase hex digits,
// else s.
func unhex(s string, n int) string {
	if len(s) != n || n > 64 || !isLowerHex(s) {
		return s
	}
	var b [32]byte
	_, _ = hex.Decode(b[:n/2], []byte(s)) // digits checked above; the conversion does not copy
	return string(b[:n/2])
}

// shownFP is the fingerprint a stored one stands for.
func shownFP(fp string) string {
	if len(fp) == 32 {
		return hex.EncodeToString([]byte(fp))
	}
	return fp
}
