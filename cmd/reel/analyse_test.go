package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/reelkit/reel/analysis"
)

// TestMain keeps every core for the whole test binary: the analysis
// commands set GOMAXPROCS for their process (defaultMaxProcs), and the
// tests run them in this one, beside replays and servers whose timing
// wants the cores; a GOMAXPROCS already set is left alone.
func TestMain(m *testing.M) {
	if os.Getenv("GOMAXPROCS") == "" {
		os.Setenv("GOMAXPROCS", strconv.Itoa(runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}

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

// TestAnalysisProcs: stats and report run on analysis.Procs Ps, and a
// GOMAXPROCS the user set wins.
func TestAnalysisProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		env  string
		set  int // what the runtime made of $GOMAXPROCS, here
		want int
	}{{"", 3, analysis.Procs}, {"3", 3, 3}} {
		t.Setenv("GOMAXPROCS", tc.env)
		runtime.GOMAXPROCS(tc.set)
		defaultMaxProcs(analysis.Procs)
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("GOMAXPROCS=%q: %d Ps, want %d", tc.env, got, tc.want)
		}
	}
}
