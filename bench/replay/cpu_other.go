//go:build !unix

package main

import "time"

// cpuTime is not measured here: cpu_us_per_req reads 0.
func cpuTime() time.Duration { return 0 }
