package main

import (
	"runtime/debug"
	"testing"

	"github.com/reelkit/reel/analysis"
)

// TestAnalysisGC: stats and report collect at analysis.GCPercent, and a
// GOGC the user set wins.
func TestAnalysisGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		env  string
		want int
	}{{"", analysis.GCPercent}, {"100", 100}, {"off", 100}} {
		t.Setenv("GOGC", tc.env)
		debug.SetGCPercent(100) // what the runtime made of $GOGC, here
		defaultGCPercent(analysis.GCPercent)
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("GOGC=%q: GC percent %d, want %d", tc.env, got, tc.want)
		}
	}
}
