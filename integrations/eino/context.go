package tgeino

import (
	"context"

	"github.com/cloudwego/eino/adk"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal (host.ErrNoPrincipal).
var ErrNoPrincipal = host.ErrNoPrincipal

// WithPrincipal returns ctx carrying the principal the run acts for, which
// the host takes from its session: pass the returned context to the
// graph's Invoke or the Runner's Run and Resume (host.WithPrincipal).
func WithPrincipal(ctx context.Context, p guard.Principal) context.Context {
	return host.WithPrincipal(ctx, p)
}

// PrincipalFrom returns the principal WithPrincipal put on ctx, or
// ErrNoPrincipal: the default Options.Principal.
func PrincipalFrom(ctx context.Context) (guard.Principal, error) { return host.PrincipalFrom(ctx) }

// WithScope returns ctx carrying the run's scope: its run, session or
// checkpoint id, the same on every retry and resume of the run
// (host.WithScope).
func WithScope(ctx context.Context, scope string) context.Context { return host.WithScope(ctx, scope) }

// ScopeFrom returns the scope WithScope put on ctx, "" when none: the
// default Options.Scope.
func ScopeFrom(ctx context.Context) string { return host.ScopeFrom(ctx) }

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
