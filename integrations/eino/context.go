package tgeino

import (
	"context"

	"github.com/cloudwego/eino/adk"
)

// SessionScope returns an Options.Scope that reads the scope from the adk
// session value under key, which the host sets on the Runner's Run
// (adk.WithSessionValues): Eino keeps session values in its checkpoints,
// so a resumed run has the same scope without the host passing it again.
// A value that is not a string is no scope.
func SessionScope(key string) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		v, _ := adk.GetSessionValue(ctx, key)
		s, _ := v.(string)
		return s
	}
}
