//go:build !linux

package replayer

import "time"

// canSleepPrecise: no precise thread sleep here; the dispatcher spins.
func canSleepPrecise() bool { return false }

func sleepPrecise(time.Duration) {}
