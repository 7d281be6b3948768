//go:build !unix

package formats_test

import "time"

// cpuTime is not measured here: CPU-time metrics read 0.
func cpuTime() time.Duration { return 0 }
