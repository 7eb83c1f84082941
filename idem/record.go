package idem

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Idempotency records and call bindings are Redis strings: their fields in
// a fixed order, each a netstring ("<length>:<bytes>"), as lua/prelude.lua
// writes them (encode, decode). One SET stores a record with its TTL, and a
// record costs a string: a Redis hash holding a value over 64 bytes (a
// tool's output) is a hashtable several times its size. Records an earlier
// version kept as hashes are still read, by field name, and replaced by
// strings when next written.

// The fields of a record and of a binding, in stored order.
var (
	recordNames  = []string{"fp", "state", "data", "msg", "op", "lease", "token", "tool", "key", "call", "done"}
	bindingNames = []string{"fp", "code", "data", "msg", "key", "done"}
)

// decodeFields reads a stored record or binding: its fields, "" where one is
// empty. It stops at the first malformed field.
func decodeFields(s string) []string {
	var out []string
	for len(s) > 0 {
		colon := strings.IndexByte(s[:min(len(s), 20)], ':')
		if colon < 0 {
			break
		}
		n, err := strconv.Atoi(s[:colon])
		if err != nil || n < 0 || n > len(s)-colon-1 {
			break
		}
		out = append(out, s[colon+1:colon+1+n])
		s = s[colon+1+n:]
	}
	return out
}

// readFields reads the records or bindings at keys as maps of their named
// fields, nil for a key that does not exist, in two round trips at most:
// each key's type and string value in one pipeline, then the fields of any
// that an earlier version kept as a hash.
func readFields(ctx context.Context, rdb redis.Cmdable, keys []string, names []string) ([]map[string]string, error) {
	types := make([]*redis.StatusCmd, len(keys))
	vals := make([]*redis.StringCmd, len(keys))
	// Pipelined's error is the first command's that failed; each command's
	// own is read below, where a GET of a hash (WRONGTYPE) is no error.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i], vals[i] = p.Type(ctx, k), p.Get(ctx, k)
		}
		return nil
	})
	out := make([]map[string]string, len(keys))
	var hashes []int
	for i := range keys {
		if err := types[i].Err(); err != nil {
			return nil, err
		}
		switch types[i].Val() {
		case "string":
			v, err := vals[i].Result()
			if err != nil && err != redis.Nil { // Nil: gone since TYPE
				return nil, err
			}
			if err == nil {
				out[i] = namedFields(decodeFields(v), names)
			}
		case "hash":
			hashes = append(hashes, i)
		}
	}
	if len(hashes) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(hashes))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range hashes {
			cmds[j] = p.HMGet(ctx, keys[i], names...)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for j, i := range hashes {
		m := make(map[string]string, len(names))
		for f, name := range names {
			if s, ok := cmds[j].Val()[f].(string); ok {
				m[name] = s
			}
		}
		out[i] = m
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
	for i := 0; i < n/2; i++ {
		b[i] = unhexDigit(s[2*i])<<4 | unhexDigit(s[2*i+1])
	}
	return string(b[:n/2])
}

func unhexDigit(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// shownFP is the fingerprint a stored one stands for.
func shownFP(fp string) string {
	if len(fp) == 32 {
		return hex.EncodeToString([]byte(fp))
	}
	return fp
}
