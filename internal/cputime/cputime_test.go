//go:build unix

package cputime

import (
	"testing"
	"time"
)

func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work", before)
	}
	x := uint64(1)
	for i := 0; i < 1_000_000 && Process()-before < time.Millisecond; i++ { // until 1 ms of CPU; at most ~1 s
		for j := 0; j < 1000; j++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() went from %v to %v over busy work (x=%d)", before, after, x)
	}
}
