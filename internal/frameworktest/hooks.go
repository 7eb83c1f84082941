package frameworktest

import (
	"context"
	"errors"

	"github.com/toolguard/toolguard/guard"
)

// Hooks are the host functions of an integration whose host functions
// see a context.Context (Eino's, Genkit's): who the call acts for, its
// scope, and the hook on each guard call. A nil one is the
// integration's default.
type Hooks struct {
	Principal func(context.Context) (guard.Principal, error)
	Scope     func(context.Context) string
	Call      func(context.Context, *guard.Call)
}

// NoPrincipal names the case of FailingHooks in which every hook is the
// default and the context the test passes carries no principal.
const NoPrincipal = "no principal"

// FailingHooks returns, by name, host functions that fail or panic: each
// must stop the call before the guard, with nothing run, nothing audited
// and no panic reaching the host. In the NoPrincipal case the hooks are
// all nil; the test's context must carry no principal.
func FailingHooks() map[string]Hooks {
	return map[string]Hooks{
		"principal error": {Principal: func(context.Context) (guard.Principal, error) {
			return guard.Principal{}, errors.New("session expired")
		}},
		"principal panic": {Principal: func(context.Context) (guard.Principal, error) { panic("session store down") }},
		NoPrincipal:       {},
		"scope panic":     {Scope: func(context.Context) string { panic("no session") }},
		"call panic":      {Call: func(context.Context, *guard.Call) { panic("hook bug") }},
	}
}
