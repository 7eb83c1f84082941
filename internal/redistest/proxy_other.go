//go:build !linux

package redistest

// preciseWaiter returns nil: outside Linux the proxy waits on Go timers.
func preciseWaiter() waiter { return nil }
