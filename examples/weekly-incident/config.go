package main

import (
	"errors"

	"fmt"
	"github.com/reelkit/reel/examples/simcluster/cluster"
	"os"
	"path/filepath"
	"time"
)

// config is one telling of the story. Spans are wall clock: at TimeScale 10
// a 60 s recording is ten simulated minutes.
type config struct {
	Dir  string // output directory (created)
	Seed uint64 // traffic seed

	TimeScale float64 // simulated seconds per wall second (simulator --time-scale, traffic --speed)
	Rate      float64 // mean request rate in simulated req/s (the bursty process's)
	// MaxLag is how far the simulator's step loop may fall behind before
	// simulated time slips. A busy machine stalls the process for tens of
	// milliseconds — at ×10 that is a simulated GPU losing a fraction of its
	// capacity, which turns the incident into an overload no scheduler
	// fixes. Catching up instead keeps the simulated GPU's capacity exact
	// and only bunches token delivery after a stall.
	MaxLag time.Duration

	Record      time.Duration // length of the recorded traffic
	IncidentAt  time.Duration // when the weekly long-prompt window opens, from the traffic's start
	IncidentFor time.Duration // how long it lasts
	LongShare   float64       // share of the window's requests with long prompts
	LongFactor  float64       // how much longer they are

	Frame       time.Duration // analysis and replay frame
	ScrapeEvery time.Duration // how often the servers' /metrics are scraped
	Lead, Tail  int           // normal frames replayed before and after the incident

	// LongPrompt is the prompt length (tokens) from which a prompt is long:
	// the fix's separate-queue threshold, and the line between the short
	// requests whose TTFT the story judges and the long ones.
	LongPrompt int
	SLO        string // per-request SLO in wall clock (reel --slo syntax)

	// MinImprovement is the cut in short requests' TTFT p99 the fix must
	// show (0.4: at least 40 % lower, with the confidence interval of the
	// change below zero).
	MinImprovement float64
	// Progress prints a line every this much wall time while traffic runs
	// (0: none).
	Progress time.Duration
}

// defaultConfig is the full story: about two minutes of wall time.
//
// Why these numbers: the simulated server is vLLM serving an 8B model on
// one A100-40GB (simcluster's defaults). At 2 requests/s of chat (prompts
// mean ≈ 1.5k tokens, outputs p50 ≈ 130) prefill takes about a quarter of
// the GPU's time, so the bursty process's calm and busy periods stay inside
// the SLO. When 60 % of the requests carry prompts 4× longer, prefill needs
// ~0.7 GPU-seconds per second and every step carries a 2k-token prefill
// chunk: the batch slows for everyone and short requests queue behind long
// prefills — TTFT p99 rises about tenfold (cluster.Simulate with seeds 1–3:
// 4.9–9.6 s against 0.4–0.6 s outside the window, 0.8–0.9 s with the fix;
// rates of 2.5 and above tip some seeds into an overload that no scheduler
// fixes). The fix (vLLM's long_prefill_token_threshold idea: long prompts in
// their own queue, one at a time, a quarter of each step while short ones
// wait) hands the delay to the long prompts.
func defaultConfig() config {
	return config{
		Seed:           1,
		TimeScale:      10,
		Rate:           2,
		MaxLag:         time.Second,
		Record:         60 * time.Second,
		IncidentAt:     28 * time.Second,
		IncidentFor:    14 * time.Second,
		LongShare:      0.6,
		LongFactor:     4,
		Frame:          2 * time.Second,
		ScrapeEvery:    500 * time.Millisecond,
		Lead:           3,
		Tail:           2,
		LongPrompt:     3000,
		SLO:            "ttft=100ms",
		MinImprovement: 0.4,
		Progress:       10 * time.Second,
	}
}

// quickConfig is the CI telling: same server and traffic, a shorter
// recording, one-second frames.
func quickConfig() config {
	c := defaultConfig()
	c.Record = 16 * time.Second
	c.IncidentAt = 6 * time.Second
	c.IncidentFor = 6 * time.Second
	// Seed 1's window falls on a busy stretch of the bursty process: half
	// the requests long is already a clear incident there (0.6 tips the
	// simulated GPU into an overload that outlasts the window).
	c.LongShare = 0.5
	c.Frame = time.Second
	c.ScrapeEvery = 250 * time.Millisecond
	c.Lead, c.Tail = 2, 1
	c.Progress = 0
	return c
}

// server is the simulated server: production and the baseline shadow, or
// with fix the shadow with the separate long-prompt queue.
func (c *config) server(fix bool) cluster.Options {
	o := cluster.Options{TimeScale: c.TimeScale, MaxLag: c.MaxLag}
	if fix {
		o.LongPromptThreshold = c.LongPrompt
	}
	return o
}

// outputDir returns dir after making sure it is new or empty, or a fresh
// ./reel-story/run-TIMESTAMP when dir is empty.
func outputDir(dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join("reel-story", "run-"+time.Now().Format("20060102-150405"))
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("output directory: %w", err)
	case len(entries) > 0:
		return "", fmt.Errorf("output directory %s is not empty: give a new one with --out", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	return dir, nil
}
