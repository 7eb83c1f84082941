package idem

import "github.com/redis/go-redis/v9"

// scriptReply reads a script's reply: an array of strings, or the same
// strings packed as one (packFields), as the scripts return their common
// replies (lua/prelude.lua, answer).
func scriptReply(cmd *redis.Cmd) ([]string, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if s, ok := v.(string); ok {
		return decodeFields(s), nil
	}
	return cmd.StringSlice()
}
