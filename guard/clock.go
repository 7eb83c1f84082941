package guard

import "time"

// Clock tells the guard the time. Every time-based decision (approval
// expiry, reservation leases) uses it, never the store's own clock, so that
// workers and tests agree on what "now" is.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock, the default.
var SystemClock Clock = systemClock{}
