package tgeino

import (
	"context"

	"github.com/cloudwego/eino/adk"

	"github.com/toolguard/toolguard/host"
)

// The principal and the scope of a run on a context: host's one pair of
// helpers, under this package's names. Pass the context WithPrincipal and
// WithScope return to the graph's Invoke or the Runner's Run and Resume;
// PrincipalFrom and ScopeFrom are the default Options.Principal and
// Options.Scope.
var (
	WithPrincipal = host.WithPrincipal
	PrincipalFrom = host.PrincipalFrom
	WithScope     = host.WithScope
	ScopeFrom     = host.ScopeFrom
)

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal.
var ErrNoPrincipal = host.ErrNoPrincipal

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
