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
//
// It also learns how late it wakes (the poller, the scheduler, a busy
// machine) and wakes that much early: its lead, a moving average of its
// lateness, at most maxLead. Its now is the clock's plus the lead, so that
// the chunks it finds due when it wakes are forwarded, on average, at
// their time rather than a wake-up late.
type fdWaiter struct {
	fd   uintptr  // for timerfd_settime: File.Fd would make the file blocking
	f    *os.File // for reading, through the poller
	lead time.Duration
}

// maxLead bounds a waiter's lead.
const maxLead = 200 * time.Microsecond

// preciseWaiter returns a timerfd waiter, or nil if the kernel refuses one.
func preciseWaiter() waiter {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil
	}
	return &fdWaiter{fd: fd, f: os.NewFile(fd, "timerfd")}
}

// coarseWait is how long before its time a wait leaves a Go timer, which a
// closed done interrupts, for the timerfd, which it does not.
const coarseWait = 2 * time.Millisecond

func (w *fdWaiter) now() time.Time { return time.Now().Add(w.lead) }

func (w *fdWaiter) until(t time.Time, done <-chan struct{}) bool {
	if d := time.Until(t); d > coarseWait {
		if !(timerWaiter{}).until(t.Add(-coarseWait), done) {
			return false
		}
	}
	wake := t.Add(-w.lead)
	d := time.Until(wake)
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
	late := max(time.Since(wake), 0)
	w.lead = min(w.lead+(late-w.lead)/8, maxLead)
	return true
}

func (w *fdWaiter) close() { _ = w.f.Close() }
