package main

// Server-side signals on the command line: --scrape for replay and record
// (samples into DIR.metrics), --series for stats, report and compare.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer"
	"github.com/reelkit/reel/scrape"
)

// scrapeFlags are --scrape and its companions.
type scrapeFlags struct {
	urls           []string
	every, timeout time.Duration
	series         []string
}

func (f *scrapeFlags) register(fs *pflag.FlagSet, whose string) {
	fs.StringArrayVar(&f.urls, "scrape", nil, "scrape this Prometheus endpoint ("+whose+" /metrics, DCGM exporter) during the run into DIR.metrics beside the output (repeatable)")
	fs.DurationVar(&f.every, "scrape-every", scrape.DefaultEvery, "scrape interval, on whole multiples of the wall clock")
	fs.DurationVar(&f.timeout, "scrape-timeout", 0, "give up on one scrape after this long (0: --scrape-every, at most 10s); a slow endpoint never delays traffic")
	fs.StringSliceVar(&f.series, "scrape-series", nil, "store only these metric families (default: all the endpoint serves)")
}

func (f *scrapeFlags) enabled() bool { return len(f.urls) > 0 }

// check validates the flags before anything starts.
func (f *scrapeFlags) check(hint string) error {
	if !f.enabled() {
		return nil
	}
	if f.every <= 0 || f.timeout < 0 {
		return &usageError{msg: "--scrape-every must be positive and --scrape-timeout ≥ 0", hint: hint}
	}
	return nil
}

// scrapeRun is a scraper writing into one dataset's metrics directory.
type scrapeRun struct {
	s      *scrape.Scraper
	w      *formats.Writer[formats.Metric]
	stderr io.Writer
}

// start opens the metrics dataset in dir (formats.MetricsDir of the output)
// and starts scraping into it; name is the writer's recorder id there.
func (f *scrapeFlags) start(ctx context.Context, dir, name string, stderr io.Writer) (*scrapeRun, error) {
	w, err := formats.NewWriter[formats.Metric](ctx, formats.WriterOptions{
		Dir: dir, Recorder: name, Source: "scrape",
		RowGroupBytes: 4 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("open metrics: %w", err)
	}
	s, err := scrape.Start(ctx, w, scrape.Options{Targets: f.urls, Every: f.every, Timeout: f.timeout, Series: f.series})
	if err != nil {
		w.Close(context.Background())
		return nil, &usageError{msg: err.Error(), hint: "--scrape http://shadow:8000/metrics"}
	}
	return &scrapeRun{s: s, w: w, stderr: stderr}, nil
}

// Close stops scraping, reports the counts (failures by reason) on stderr
// and closes the metrics files.
func (r *scrapeRun) Close(ctx context.Context) error {
	scrapeErr := r.s.Close(ctx)
	r.s.Stats().WriteText(r.stderr)
	if scrapeErr != nil {
		r.w.Close(ctx)
		return scrapeErr
	}
	if err := r.w.Close(ctx); err != nil {
		return fmt.Errorf("close metrics: %w", err)
	}
	return nil
}

// ctxCloser is a sink that closes under the Close convention (formats'
// package comment); *formats.Writer is one.
type ctxCloser interface{ Close(context.Context) error }

// scrapedSink is a replay's result sink that also stops the scraper
// running beside it when the run's results are closed.
type scrapedSink struct {
	replayer.Sink
	run *scrapeRun
}

// Close stops the scraper, then closes the results.
func (s *scrapedSink) Close(ctx context.Context) error {
	err := s.run.Close(ctx)
	if c, ok := s.Sink.(ctxCloser); ok {
		err = errors.Join(err, c.Close(ctx))
	}
	return err
}

// withScrape starts scraping beside a replay's results in dir, when asked.
func (f *scrapeFlags) withScrape(ctx context.Context, sink replayer.Sink, dir, name string, stderr io.Writer) (replayer.Sink, error) {
	if !f.enabled() {
		return sink, nil
	}
	run, err := f.start(ctx, dir, "scrape-"+name, stderr)
	if err != nil {
		if c, ok := sink.(ctxCloser); ok {
			c.Close(context.Background())
		}
		return nil, err
	}
	return &scrapedSink{Sink: sink, run: run}, nil
}

// attachSignals adds the server-side signals kept beside paths to s; a
// problem reading them is a warning, not a failed report.
func attachSignals(ctx context.Context, paths []string, s *analysis.Summary, series []string, ro formats.ReaderOptions, stderr io.Writer) {
	if s == nil {
		return
	}
	sig, err := analysis.LoadSignals(ctx, paths, s, analysis.SignalOptions{Series: series, Reader: ro})
	if err != nil {
		fmt.Fprintf(stderr, "warning: server-side signals: %v\n", err)
		return
	}
	s.Signals = sig
}
