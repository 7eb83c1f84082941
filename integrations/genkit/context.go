package tggenkit

import "github.com/toolguard/toolguard/host"

// The principal and the scope of a generation on a context: host's one
// pair of helpers, under this package's names. The host takes the
// principal from its session (in a flow, from the action context its
// context provider made: core.FromContext) and passes the context
// WithPrincipal and WithScope return to genkit.Generate, on the first call
// and on every resume; PrincipalFrom and ScopeFrom are the default
// Options.Principal and Options.Scope.
var (
	WithPrincipal = host.WithPrincipal
	PrincipalFrom = host.PrincipalFrom
	WithScope     = host.WithScope
	ScopeFrom     = host.ScopeFrom
)

// ErrNoPrincipal is PrincipalFrom's error for a context that carries no
// principal.
var ErrNoPrincipal = host.ErrNoPrincipal
