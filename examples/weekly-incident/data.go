package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/scrape"
)

// keepFunc selects rows by prompt length; nil keeps every row.
type keepFunc func(promptTokens int32) bool

// shortOnly keeps the requests whose prompt is below the long-prompt line.
func shortOnly(long int) keepFunc {
	return func(p int32) bool { return p > 0 && int(p) < long }
}

// loadExchanges reads a recording into a new Analyzer, rows in [from, to)
// (zero: open) that keep selects.
func loadExchanges(ctx context.Context, dir string, opt analysis.Options, from, to time.Time, keep keepFunc) (*analysis.Analyzer, error) {
	a := analysis.New(opt)
	err := each[formats.Exchange](ctx, dir, from, to, func(x *formats.Exchange) {
		if keep == nil || keep(x.PromptTokens) {
			a.AddExchange(x)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read recording: %w", err)
	}
	return a, nil
}

// loadResults reads replay results into a new Analyzer, rows whose
// original start is in [from, to) that keep selects.
func loadResults(ctx context.Context, dir string, opt analysis.Options, from, to time.Time, keep keepFunc) (*analysis.Analyzer, error) {
	a := analysis.New(opt)
	err := each[formats.Result](ctx, dir, from, to, func(r *formats.Result) {
		if keep == nil || keep(r.PromptTokens) {
			a.AddResult(r)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return a, nil
}

// each calls fn for every row of the dataset under dir, in time order.
func each[T formats.Record](ctx context.Context, dir string, from, to time.Time, fn func(*T)) error {
	r, err := formats.OpenReader[T](ctx, []string{dir}, formats.ReaderOptions{From: from, To: to})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(row)
	}
}

// scraping samples a server's /metrics into dir.metrics (the layout reel
// record --scrape and reel replay --scrape use) until stop.
type scraping struct {
	s *scrape.Scraper
	w *formats.Writer[formats.Metric]
}

func startScrape(ctx context.Context, dir, name, url string, every time.Duration) (*scraping, error) {
	w, err := formats.NewWriter[formats.Metric](ctx, formats.WriterOptions{
		Dir: formats.MetricsDir(dir), Recorder: "scrape-" + name, Source: "scrape",
	})
	if err != nil {
		return nil, fmt.Errorf("open metrics: %w", err)
	}
	s, err := scrape.Start(ctx, w, scrape.Options{Targets: []string{url}, Every: every})
	if err != nil {
		w.Close(context.Background())
		return nil, fmt.Errorf("start scraper: %w", err)
	}
	return &scraping{s: s, w: w}, nil
}

// stop ends the scrape and closes its files.
func (sc *scraping) stop() (scrape.Stats, error) {
	sc.s.Close(context.Background())
	st := sc.s.Stats()
	if err := sc.w.Close(context.Background()); err != nil {
		return st, fmt.Errorf("close metrics: %w", err)
	}
	return st, nil
}

// serverView is a scraped series over the incident frames and the rest.
type serverView struct {
	Label, Name string
	In, Out     float64 // mean of the per-frame means
	InMax       float64
}

// serverViews summarises the scraped gauges inside and outside [from, to).
func serverViews(sig *analysis.Signals, from, to time.Time) []serverView {
	if sig == nil {
		return nil
	}
	var out []serverView
	for _, ss := range sig.Series {
		if ss.Rate {
			continue
		}
		v := serverView{Label: ss.Label, Name: ss.Name}
		var in, rest []float64
		for _, f := range ss.Frames {
			if f.N == 0 {
				continue
			}
			if !f.Start.Before(from) && f.Start.Before(to) {
				in = append(in, f.Mean)
				v.InMax = max(v.InMax, f.Max)
			} else {
				rest = append(rest, f.Mean)
			}
		}
		v.In, v.Out = mean(in), mean(rest)
		out = append(out, v)
	}
	return out
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// drainingTransport reads what is left of a response body before closing
// it, as a well-behaved client does: the connection goes back to the pool,
// and a stream's end (after data: [DONE]) reaches the sidecar before the
// client hangs up, so the exchange is recorded complete rather than as a
// client abort.
type drainingTransport struct{ http.RoundTripper }

func (t drainingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = &drainingBody{ReadCloser: resp.Body}
	}
	return resp, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t drainingTransport) CloseIdleConnections() {
	if c, ok := t.RoundTripper.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type drainingBody struct{ io.ReadCloser }

// maxDrain bounds what Close reads: a stream's tail after [DONE] is a few
// bytes; anything longer is not worth waiting for.
const maxDrain = 64 << 10

func (b *drainingBody) Close() error {
	io.Copy(io.Discard, io.LimitReader(b.ReadCloser, maxDrain))
	return b.ReadCloser.Close()
}
