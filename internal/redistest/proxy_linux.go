package redistest

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// fdWaiter waits on a timerfd, which Go's poller watches like a socket:
// the kernel wakes it within tens of microseconds of its time, where a Go
// timer of less than a millisecond sleeps about a millisecond when the
// process is otherwise idle (the poller rounds its timeout up to 1 ms).
type fdWaiter struct {
	fd uintptr  // for timerfd_settime: File.Fd would make the file blocking
	f  *os.File // for reading, through the poller
}

// preciseWaiter returns a timerfd waiter, or nil if the kernel refuses one.
func preciseWaiter() waiter {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil
	}
	return &fdWaiter{fd, os.NewFile(fd, "timerfd")}
}

// coarseWait is how long before its time a wait leaves a Go timer, which a
// closed done interrupts, for the timerfd, which it does not.
const coarseWait = 2 * time.Millisecond

func (w *fdWaiter) now() time.Time { return time.Now() }

func (w *fdWaiter) until(t time.Time, done <-chan struct{}) bool {
	if d := time.Until(t); d > coarseWait {
		if !(timerWaiter{}).until(t.Add(-coarseWait), done) {
			return false
		}
	}
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	spec := struct{ interval, value syscall.Timespec }{value: syscall.NsecToTimespec(int64(d))}
	if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, w.fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
		return timerWaiter{}.until(t, done)
	}
	var expirations [8]byte
	if _, err := w.f.Read(expirations[:]); err != nil {
		return timerWaiter{}.until(t, done)
	}
	return true
}

func (w *fdWaiter) close() { _ = w.f.Close() }
