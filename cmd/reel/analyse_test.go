package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
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

// TestAnalysisProcs: stats and report run on at most analysis.Procs Ps
// (one core stays one), and a GOMAXPROCS the user set wins.
func TestAnalysisProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		env  string
		set  int // what the runtime made of $GOMAXPROCS, here
		want int
	}{{"", 3, analysis.Procs}, {"", 1, 1}, {"3", 3, 3}} {
		t.Setenv("GOMAXPROCS", tc.env)
		runtime.GOMAXPROCS(tc.set)
		defaultMaxProcs(analysis.Procs)
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("GOMAXPROCS=%q: %d Ps, want %d", tc.env, got, tc.want)
		}
	}
}

// TestAnalyseBeside: the pass beside the analysis runs to its end, and the
// error of whichever pass failed first is the one returned, not the
// cancellation it caused in the other; on one P and on two.
func TestAnalyseBeside(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(strconv.Itoa(procs)+"P", func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			testAnalyseBeside(t)
		})
	}
}

func testAnalyseBeside(t *testing.T) {
	dir := t.TempDir()
	analysistest.WriteDataset(t, dir, analysistest.WeeklyIncident(1))
	ctx := context.Background()
	var ran bool
	a, err := analyseBeside(ctx, []string{dir}, analysis.Options{}, formats.ReaderOptions{}, func(context.Context) error { ran = true; return nil })
	if err != nil || !ran || a.Summary().Requests == 0 {
		t.Fatalf("beside ran %v, err %v", ran, err)
	}
	boom := errors.New("boom")
	if _, err := analyseBeside(ctx, []string{dir}, analysis.Options{}, formats.ReaderOptions{}, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("beside failing: err %v, want %v", err, boom)
	}
	waitCancel := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	if _, err := analyseBeside(ctx, []string{filepath.Join(dir, "none")}, analysis.Options{}, formats.ReaderOptions{}, waitCancel); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("analysis failing: err %v, want the dataset's error", err)
	}
}
