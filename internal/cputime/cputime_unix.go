//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the user + system CPU time of every thread of the process so
// far (GC and system calls included); 0 when it cannot be read.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
