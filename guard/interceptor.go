package guard

import "context"

// Handler runs one dispatch. Interceptors wrap it.
type Handler func(ctx context.Context, call *Call) (*Result, error)

// StatusHandler runs one status query. Interceptors wrap it.
type StatusHandler func(ctx context.Context, call *StatusCall) (*Result, error)

// Interceptor wraps the guard's two kinds of call, for tracing, logging,
// metrics or policy: Options.Interceptors lists them, the first listed
// outermost. An interceptor that cares about one kind returns the other's
// handler unchanged; InterceptorFunc does so for the common case.
type Interceptor interface {
	WrapDispatch(next Handler) Handler
	WrapStatus(next StatusHandler) StatusHandler
}

// InterceptorFunc is an Interceptor of dispatches: status queries pass
// through it unchanged.
type InterceptorFunc func(next Handler) Handler

// WrapDispatch calls f.
func (f InterceptorFunc) WrapDispatch(next Handler) Handler { return f(next) }

// WrapStatus returns next unchanged.
func (f InterceptorFunc) WrapStatus(next StatusHandler) StatusHandler { return next }
