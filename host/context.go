package host

import (
	"context"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

type principalKey struct{}

type scopeKey struct{}

type invocationKey struct{}

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal, and the error Host.Call wraps when the host's Principal
// function gives none: nothing runs. It is the one such error of every
// integration (tgadk, tgeino, tggenkit), so errors.Is reads the same for
// all; its text names no reason of the host's, as frameworks show it to
// the model.
var ErrNoPrincipal = errors.New("host: the host could not tell who this call acts for (no principal); nothing was run")

// WithPrincipal returns ctx carrying the principal the run acts for, which
// the host takes from its session or token, never from the model: pass
// the returned context to the framework's run, on the first call and on
// every resume.
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

// WithScope returns ctx carrying the run's scope: the framework's session,
// conversation, run or workflow id, the same on every retry and resume of
// it (guard.ExecutionContext.Scope).
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFrom returns the scope WithScope put on ctx, "" when none: the
// default Options.Scope.
func ScopeFrom(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

// withInvocation returns ctx carrying the guard's invocation of the call
// an imported tool runs for; Imported.Execute puts it there.
func withInvocation(ctx context.Context, inv *guard.Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the guard's invocation of the call an imported
// tool runs for: its principal, its canonical arguments and, above all,
// IdempotencyKey, the key to hand the downstream system so that a retry
// the guard cannot see is deduplicated there. It is nil outside a guarded
// run.
func InvocationFrom(ctx context.Context) *guard.Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*guard.Invocation)
	return inv
}
