//go:build linux

package replayer

import (
	"syscall"
	"time"
	"unsafe"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK: how late the kernel may
// wake a sleeping thread to batch wake-ups (50 µs by default).
const prSetTimerSlack = 29

// maxRawSleep bounds one precise sleep: the thread keeps its Go processor
// while it sleeps, and a garbage-collection stop waits for it.
const maxRawSleep = 200 * time.Microsecond

// canSleepPrecise reports whether sleepPrecise works here.
func canSleepPrecise() bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	return e == 0
}

// sleepPrecise blocks the calling thread for d (at most maxRawSleep) with
// nanosleep, after setting the thread's timer slack to 1 ns (the goroutine
// may have moved to another thread since its last sleep), so it wakes
// within tens of µs. Go's own timers wake up to a millisecond late (the
// runtime's poller sleeps in whole milliseconds), and spinning burns the
// core the target may need. It is a raw system call: going through the
// scheduler (syscall.Nanosleep) cost 45 µs of CPU per 200-µs sleep here,
// the raw call 18 µs, spinning 167 µs. A thread left with 1 ns slack only
// wakes more precisely.
func sleepPrecise(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(min(d, maxRawSleep)))
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
