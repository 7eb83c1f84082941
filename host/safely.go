package host

import "errors"

// ErrHostPanic is the error of a call whose host function (Principal,
// Scope, Call, an Approver) panicked: nothing runs. The panic's value is
// kept out of its text, since frameworks may show a tool's error to the
// model; errors.Is finds it.
var ErrHostPanic = errors.New("host: a host function panicked; nothing was run")

// Safely runs a host function, turning a panic into ErrHostPanic.
func Safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = ErrHostPanic
		}
	}()
	return f()
}
