//go:build unix

package formats_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used so far; with
// -cpu 1 it is the benchmark's own work plus the runtime's, and unlike wall
// time it barely moves when other processes load the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
