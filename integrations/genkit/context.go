package tggenkit

import (
	"context"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

type principalKey struct{}

type scopeKey struct{}

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal.
var ErrNoPrincipal = errors.New("tggenkit: the context carries no principal (WithPrincipal)")

// WithPrincipal returns ctx carrying the principal the generation acts
// for, which the host takes from its session (in a flow, from the action
// context its context provider made: core.FromContext): pass the returned
// context to genkit.Generate, on the first call and on every resume.
func WithPrincipal(ctx context.Context, p guard.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put on ctx, or
// ErrNoPrincipal: the default Options.Principal.
func PrincipalFrom(ctx context.Context) (guard.Principal, error) {
	p, ok := ctx.Value(principalKey{}).(guard.Principal)
	if !ok {
		return guard.Principal{}, ErrNoPrincipal
	}
	return p, nil
}

// WithScope returns ctx carrying the scope of the generation: the host's
// session, conversation or flow run id, the same on every retry and resume
// of it.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFrom returns the scope WithScope put on ctx, "" when none: the
// default Options.Scope.
func ScopeFrom(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}
