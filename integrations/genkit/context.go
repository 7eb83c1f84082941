package tggenkit

import (
	"context"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal (host.ErrNoPrincipal).
var ErrNoPrincipal = host.ErrNoPrincipal

// WithPrincipal returns ctx carrying the principal the generation acts
// for, which the host takes from its session (in a flow, from the action
// context its context provider made: core.FromContext): pass the returned
// context to genkit.Generate, on the first call and on every resume
// (host.WithPrincipal).
func WithPrincipal(ctx context.Context, p guard.Principal) context.Context {
	return host.WithPrincipal(ctx, p)
}

// PrincipalFrom returns the principal WithPrincipal put on ctx, or
// ErrNoPrincipal: the default Options.Principal.
func PrincipalFrom(ctx context.Context) (guard.Principal, error) { return host.PrincipalFrom(ctx) }

// WithScope returns ctx carrying the scope of the generation: the host's
// session, conversation or flow run id, the same on every retry and resume
// of it (host.WithScope).
func WithScope(ctx context.Context, scope string) context.Context { return host.WithScope(ctx, scope) }

// ScopeFrom returns the scope WithScope put on ctx, "" when none: the
// default Options.Scope.
func ScopeFrom(ctx context.Context) string { return host.ScopeFrom(ctx) }
